"""Streaming (decoupled) models: the checklist items for models with
`model_transaction_policy { decoupled: true }` (LLMs on TensorRT-LLM or vLLM, python-backend models
that send tokens as they come). See docs/streaming.md.

Decoupled models refuse unary ModelInfer and HTTP /infer, so they are driven over gRPC
ModelStreamInfer (one stream per virtual user, responses matched by request id, empty final
responses requested) and, for the answer check, over HTTP generate_stream. Per request: time to
first token (TTFT), inter-token latency (ITL), latency and output tokens, as genai-perf defines them.

CFG-1: every answer ends with a final flag. PERF-1: TTFT, ITL and tokens/s at the target load
meet the SLO. PERF-2: tokens/s and TTFT against concurrency. PERF-3: a soak of streams where every
request gets its final response within a deadline and server memory stays flat. PERF-4: cancelling
streams mid-generation leaves every instance serving; SIGTERM under streams ends them cleanly.
MON-1: the server's request counter counts the streamed requests, and its first-response histogram
(where the release has one) agrees with the client's TTFT.
A deployment without decoupled models gets NOT APPLICABLE for each.
"""

from __future__ import annotations

import time

import numpy as np
import pytest

from pytest_triton_ready import progress
from pytest_triton_ready.facts import StreamingCapacity, StreamingTargetLoad
from pytest_triton_ready.faults.experiment import run_experiment
from pytest_triton_ready.faults.recording import record_outcome
from pytest_triton_ready.faults.stream_experiments import StreamingDeadStub, StreamingSigterm
from pytest_triton_ready.faults.stream_judges import judge_streaming_dead_stub, judge_streaming_sigterm, report_stuck
from pytest_triton_ready.load.judged import record_judgement
from pytest_triton_ready.load.rules import FAIL, UNDECIDED, judge
from pytest_triton_ready.load.streaming import StreamingLoad
from pytest_triton_ready.load.streaming_confidence import slo_rules, streaming_estimate
from pytest_triton_ready.load.streaming_requests import StreamingPlan
from pytest_triton_ready.load.streaming_rules import (
    FIRST_RESPONSE_FAMILIES,
    SUCCESS_COUNTER,
    CurvePoint,
    bucket_delta,
    capacity_is_lower_bound,
    enough_valid,
    fitted_growth,
    histogram_buckets,
    histogram_quantile,
    judge_curve,
    server_counted_requests,
    streaming_slo,
)
from pytest_triton_ready.load.streaming_single import answer_values, stream_arrays
from pytest_triton_ready.load.streaming_sse import generate_stream, sse_body
from pytest_triton_ready.models import initial_state_of, instance_count, ready_decoupled_models

pytestmark = pytest.mark.usefixtures("triton")

QUESTION = "Is this deployment ready for production?"


def _streaming_models(triton, check) -> list[str]:
    models = ready_decoupled_models(triton)
    if not models:
        check.not_applicable("no READY decoupled (streaming) model in scope")
    return models


def _plan(triton, model) -> StreamingPlan:
    client = triton.client
    return StreamingPlan.from_metadata(model, client.model_metadata(model), client.model_config(model),
                                      declared=client.declared)


def _n(check, name) -> float:
    return check.threshold(name).value


def _load(triton, plan, check, **kwargs) -> StreamingLoad:
    kwargs.setdefault("max_tokens", int(_n(check, "streaming_max_tokens")))
    kwargs.setdefault("deadline_s", _n(check, "streaming_final_deadline_s"))
    return StreamingLoad(triton.endpoints.grpc_url, plan, headers=triton.settings.headers, **kwargs)


# -- CFG-1 --------------------------------------------------------------------------------------------
@pytest.mark.triton_check("CFG-1")
def test_streaming_answers_end_with_final_flag(triton, check):
    """Every decoupled model answers a real streamed request over gRPC with output and a final
    response (`triton_final_response`) within the deadline; every response's outputs keep the
    declared contract (names, datatypes, shapes); the answers match the team's `expectations:`
    (and a data file's validation_data) where declared; the same request answered twice gives the
    same answer (an error where the model is declared deterministic, else a warning); its HTTP
    generate_stream answer carries no error in any chunk."""
    from pytest_triton_ready.expectations import answer_mismatches, expectation_for
    from pytest_triton_ready.input_data import InputData, InputDataError

    models = _streaming_models(triton, check)
    deadline = _n(check, "streaming_final_deadline_s")
    client, url, headers = triton.client, triton.endpoints.grpc_url, triton.settings.headers
    for model in models:
        plan = _plan(triton, model)
        check.evidence(f"{model} request plan", f"text input {plan.prompt_input}, token budget input "
                       f"{plan.max_tokens_input}, tokens counted from output {plan.token_output}"
                       + (f", data from {plan.data.source}" if plan.data else ""))
        try:
            arrays = plan.arrays(QUESTION, 8, np.random.default_rng(0))
        except InputDataError as exc:
            check.finding(f"{model}: {exc}", model=model, rule="input-data")
            continue
        first = stream_arrays(url, plan, arrays, f"{model}-answer-1", timeout_s=deadline, headers=headers)
        if first.error:
            check.finding(f"{model}: the streamed request failed: {first.error} {client.refusal_hint(model)}",
                          model=model)
            check.evidence(f"{model} error", first.error)
            continue
        check.measure("final flag received", first.final, model=model, threshold=True, comparison="==",
                      finding=f"{model}: request {first.id} got {first.tokens} tokens in {first.responses} responses and "
                              f"no final response within {deadline:g} s")
        check.measure("output tokens", first.tokens, "tokens", model=model, threshold=1, comparison=">=",
                      finding=f"{model}: the answer carried no output in {plan.token_output}")
        for problem in first.problems:
            check.finding(f"{model}: {problem}", model=model, rule="output-contract")
        if first.ttft_s is not None:
            check.measure("time to first token", round(first.ttft_s * 1000, 3), "ms", model=model)
        expectation = expectation_for(model, triton.settings.expectations, plan.data)
        for case in expectation.cases:
            case_plan = _plan(triton, model)
            case_plan.data = InputData(case.where, ((case.inputs,),))
            try:
                answer = stream_arrays(url, case_plan, case_plan.arrays(QUESTION, 8, np.random.default_rng(0)),
                                       f"{model}-expected", timeout_s=deadline, headers=headers)
                problems = ([f"{case.where}: the request failed: {answer.error}"] if answer.error else
                            answer_mismatches(case, answer_values(answer), plan.outputs, batched=plan.batched))
            except InputDataError as exc:
                problems = [str(exc)]
            for problem in problems:
                check.finding(f"{model}: {problem}", model=model, rule="answer")
        again = stream_arrays(url, plan, arrays, f"{model}-answer-2", timeout_s=deadline, headers=headers)
        if first.final and again.final and again.text != first.text:
            check.finding(f"{model}: the same request gave different answers on two requests ({first.text[:8]} then "
                          f"{again.text[:8]})", severity="error" if expectation.deterministic else "warning",
                          model=model, rule="determinism")
        sse = generate_stream(triton.endpoints.http_url, model, sse_body(plan, QUESTION, 4),
                              timeout_s=deadline, headers=headers)
        check.measure("generate_stream chunks", len(sse.chunks), "chunks", model=model)
        if sse.error:
            where = "under HTTP 200, in a chunk" if sse.status == 200 else f"HTTP {sse.status}"
            check.finding(f"{model}: generate_stream answered an error ({where}): {sse.error}", severity="warning",
                          model=model, rule="generate-stream")
            check.evidence(f"{model} generate_stream", str(sse.chunks[-3:]) + " " + sse.error)


# -- MON-1 --------------------------------------------------------------------------------------------
@pytest.mark.triton_check("MON-1")
def test_streaming_first_response_histogram_matches_ttft(triton, triton_metrics, check):
    """Over a short streamed load, the server's success counter (nv_inference_request_success) of
    each decoupled model counts at least every request the client completed (the metrics see the
    streamed traffic), and where the server exports a first-response histogram (Triton 2.52+ with
    histogram latencies, vLLM's `vllm:time_to_first_token_seconds`) its median agrees with the
    client's TTFT median within `streaming_ttft_agreement_ms`. Where no histogram exists, the
    caveat says that TTFT agreement was not judged and what it needs; a counter the endpoint does
    not export makes the check INCOMPLETE naming it."""
    models = _streaming_models(triton, check)
    version = triton.client.server_metadata().get("version", "?")
    agreement = check.threshold("streaming_ttft_agreement_ms")
    compared = 0
    for model in models:
        plan = _plan(triton, model)
        before = triton_metrics()
        result = _load(triton, plan, check, concurrency=2, duration_s=2.0).run()
        after = triton_metrics()
        client_p50 = result.stats.ttft_ms["p50"]
        completed = result.stats.completed
        check.measure("client TTFT p50", client_p50, "ms", model=model)
        check.measure("requests the client completed", completed, "requests", model=model, threshold=1,
                      comparison=">=", finding=f"{model}: no streamed request completed during the probe")
        counted = server_counted_requests(before, after, model)
        check.measure(f"server {SUCCESS_COUNTER} rise", counted, "requests", model=model, threshold=completed,
                      comparison=">=",
                      finding=f"{model}: {SUCCESS_COUNTER} rose by {counted:.0f} while the client completed "
                              f"{completed} streamed requests: the metrics miss streamed traffic (or the URL "
                              "spreads requests over servers whose metrics are not read)" if counted is not None
                      else None)
        if counted is None:
            check.evidence(f"{model}: missing series", f"the metrics endpoint exports no {SUCCESS_COUNTER} "
                           f"series with model=\"{model}\"")
        for family, scale, label, source in FIRST_RESPONSE_FAMILIES:
            buckets = bucket_delta(histogram_buckets(before, family, label, model),
                                   histogram_buckets(after, family, label, model))
            server_p50 = histogram_quantile(buckets, 0.5)
            if server_p50 is None:
                continue
            compared += 1
            server_ms = server_p50 * scale
            check.measure(f"server first response p50 ({family})", round(server_ms, 3), "ms", model=model)
            check.measure("TTFT gap, client - server", round(abs(client_p50 - server_ms), 3) if client_p50 is not None
                          else None, "ms", model=model, threshold=agreement,
                          finding=f"{model}: {source} puts the first response at {server_ms:.1f} ms (median), "
                                  f"the client measured {client_p50} ms: one of the two is not measuring TTFT")
        families = sorted({n.split("_bucket")[0] for n in after.names
                           if n.startswith(("nv_trt_llm_", "vllm:"))})
        if families:
            check.evidence(f"{model}: LLM backend metric families", ", ".join(families))
    if not compared:
        check.caveat(f"TTFT agreement not judged: Triton {version} exports no first-response histogram for these "
                     "models (nv_inference_first_response_histogram_ms needs 2.52+ with --metrics-config "
                     "histogram_latencies=true for decoupled models, all models from 26.01; or the vLLM backend); "
                     "the request counter was judged and the client's TTFT is recorded")


# -- PERF-1 -------------------------------------------------------------------------------------------
@pytest.mark.triton_check("PERF-1")
def test_streaming_slo_at_target_load(triton, triton_settings, triton_facts, check):
    """At the target load (`streaming_concurrency` streams, closed loop) TTFT p99 and ITL p99 are
    within the model's SLO (`ttft_p99_ms`, `itl_p99_ms`), output tokens/s reaches
    `min_output_tokens_per_s` where set, every request succeeds (`success_rate_min`) and none is stuck.
    TTFT p99, ITL p99 and tokens/s are decided on their `load_confidence` intervals (the requests cut
    into windows of about `load_window_s` by their end): one whose interval straddles its threshold
    is too close to call. A measurement with fewer than `streaming_min_requests` completed requests
    is not valid, and a rule too close to call is not decided: the check is INCOMPLETE for either
    (unless it failed on another rule)."""
    models = _streaming_models(triton, check)
    concurrency = int(_n(check, "streaming_concurrency"))
    duration = _n(check, "streaming_duration_s")
    success_min = check.threshold("success_rate_min")
    min_requests = int(_n(check, "streaming_min_requests"))
    level, window_s = _n(check, "load_confidence"), _n(check, "load_window_s")
    invalid, undecided = [], []
    for model in models:
        slo = streaming_slo(triton_settings, model)
        result = _load(triton, _plan(triton, model), check, concurrency=concurrency, duration_s=duration,
                       warmup_s=1.0).run()
        stats = result.stats
        check.measure("streams (concurrency)", concurrency, "streams", model=model)
        check.measure("requests completed", stats.completed, "requests", model=model)
        if stats.completed < min_requests:
            invalid.append(f"{model}: {stats.completed} requests completed in {duration:g} s < minimum {min_requests} "
                           "(streaming_min_requests; a longer streaming_duration_s measures more)")
        judged = {rule.name: judge(rule, streaming_estimate(rule.statistic, stats, level, window_s))
                  for rule in slo_rules(slo)}
        check.measure("TTFT p50", stats.ttft_ms["p50"], "ms", model=model)
        ttft = judged["TTFT p99"]
        undecided.append(record_judgement(
            check, ttft, model=model, threshold=slo["ttft_p99_ms"],
            finding=f"{model}: TTFT p99 is {ttft.value} ms, the SLO is <= {slo['ttft_p99_ms'].value:g} ms "
                    f"({ttft.estimate.interval.describe('ms', 4) if ttft.estimate.interval else 'no interval'})"))
        check.measure("ITL p50", stats.itl_ms["p50"], "ms", model=model)
        undecided.append(record_judgement(check, judged["ITL p99"], model=model, threshold=slo["itl_p99_ms"]))
        check.measure("request latency p50", stats.latency_ms["p50"], "ms", model=model)
        check.measure("request latency p99", stats.latency_ms["p99"], "ms", model=model)
        if "output tokens/s" in judged:
            undecided.append(record_judgement(check, judged["output tokens/s"], model=model, digits=2,
                                              threshold=slo["min_output_tokens_per_s"]))
        else:
            check.measure("output tokens/s", round(stats.output_tokens_per_s, 2), "tokens/s", model=model)
        check.measure("output tokens/s per stream (lowest)", round(stats.min_user_tokens_per_s or 0.0, 2), "tokens/s", model=model)
        check.measure("responses/s", round(stats.responses_per_s, 2), "responses/s", model=model)
        check.measure("success rate", stats.success_rate, "ratio", model=model, threshold=success_min, comparison=">=")
        check.measure("stuck requests", len(stats.stuck), "requests", model=model, threshold=0)
        report_stuck(check, model, stats.stuck)
        for reason, count in stats.errors.items():
            check.evidence(f"{model} errors", f"{count} x {reason}")
        check.chart(f"{model}: TTFT, ITL and latency percentiles at {concurrency} streams", "percentile", "ms",
                    {name: [(float(k[1:]), v) for k, v in values.items() if v is not None]
                     for name, values in (("TTFT", stats.ttft_ms), ("ITL", stats.itl_ms), ("request latency", stats.latency_ms))})
        check.evidence(f"{model} streaming measurement", str(stats.to_dict()))
        triton_facts.publish(StreamingTargetLoad(model, ttft_p99_ms=stats.ttft_ms["p99"], itl_p99_ms=stats.itl_ms["p99"],
                                                 output_tokens_per_s=round(stats.output_tokens_per_s, 2),
                                                 concurrency=concurrency))
        if ttft.outcome == FAIL:
            check.recommend("TTFT over budget: fewer requests per instance (more instances or a smaller "
                            "concurrent_requests / max_num_seqs), a shorter prefill, or a budget that matches the model.")
    reasons = (["measurement not valid: " + "; ".join(invalid)] if invalid else []) + [r for r in undecided if r]
    if reasons:
        _not_valid(check, "; ".join(reasons))


def _not_valid(check, reason: str) -> None:
    """A measurement too small to judge: INCOMPLETE, unless the check already failed on another rule."""
    if check.errors:
        check.finding(reason, severity="warning")
    else:
        check.incomplete(reason)


# -- PERF-2 -------------------------------------------------------------------------------------------
@pytest.mark.triton_check("PERF-2")
def test_streaming_tokens_and_ttft_curve(triton, triton_settings, triton_facts, check):
    """Sweep concurrency 1, 2, 4 ... `streaming_curve_max_concurrency`: tokens/s must not fall by
    more than `curve_drop_tolerance` before the knee, and at least one point must keep TTFT p99
    within the SLO. Publishes the best tokens/s within SLO, and the requests/s at that point, as
    a `StreamingCapacity` fact (OPS-2 plans a decoupled model's capacity from it); a
    best point at the sweep's top where tokens/s still rose by `curve_min_gain` is a lower bound.
    Only points with at least `streaming_min_requests` completed requests, a success rate of at
    least `success_rate_min` and no stuck request count for the knee and the capacity; a model with
    fewer than half of its points (or two) valid makes the check INCOMPLETE and publishes no capacity."""
    models = _streaming_models(triton, check)
    top = int(_n(check, "streaming_curve_max_concurrency"))
    point_s = _n(check, "streaming_curve_point_s")
    success_min = _n(check, "success_rate_min")
    min_requests = int(_n(check, "streaming_min_requests"))
    level, window_s = _n(check, "load_confidence"), _n(check, "load_window_s")
    invalid, undecided = [], []
    for model in models:
        slo = streaming_slo(triton_settings, model)
        plan = _plan(triton, model)
        points: list[CurvePoint] = []
        requests_per_s: dict[int, tuple[float, float | None]] = {}  # concurrency -> (requests/s, tokens per request)
        concurrency = 1
        while concurrency <= top:
            progress.step(f"{model}: {concurrency} streams (point {len(points) + 1} of {top.bit_length()}, "
                          f"{point_s:g} s each)")
            stats = _load(triton, plan, check, concurrency=concurrency, duration_s=point_s, warmup_s=0.5).run().stats
            point = CurvePoint.measured(concurrency, stats, success_min=success_min, min_requests=min_requests,
                                        level=level, window_s=window_s)
            points.append(point)
            requests_per_s[concurrency] = (stats.requests_per_s,
                                           stats.output_tokens / stats.completed if stats.completed else None)
            check.measure(f"output tokens/s at concurrency {concurrency}", round(stats.output_tokens_per_s, 2), "tokens/s", model=model)
            check.measure(f"TTFT p99 at concurrency {concurrency}", stats.ttft_ms["p99"], "ms", model=model)
            check.measure(f"requests/s at concurrency {concurrency}", round(stats.requests_per_s, 2), "requests/s",
                          model=model)
            check.measure(f"requests completed at concurrency {concurrency}", stats.completed, "requests", model=model)
            check.measure(f"success rate at concurrency {concurrency}", stats.success_rate, "ratio", model=model)
            if point.problem:
                check.finding(f"{model}: concurrency {concurrency} does not count for the capacity: {point.problem}",
                              severity="warning", model=model)
            for reason, count in stats.errors.items():
                check.evidence(f"{model} errors at concurrency {concurrency}", f"{count} x {reason}")
            if stats.stuck:
                report_stuck(check, model, stats.stuck, limit=3)
            concurrency *= 2
        if not enough_valid(points):
            triton_facts.withdraw(StreamingCapacity, model)
            invalid.append(f"{model}: only {sum(p.trustworthy for p in points)} of {len(points)} curve points have "
                           f">= {min_requests} completed requests, a success rate >= {success_min:g} and no stuck request")
            continue
        verdict = judge_curve(points, slo["ttft_p99_ms"].value, _n(check, "curve_knee_fraction"),
                              _n(check, "curve_drop_tolerance"))
        check.chart(f"{model}: output tokens/s against concurrency", "concurrency (streams)", "output tokens/s",
                    {"tokens/s": [(p.concurrency, round(p.tokens_per_s, 2)) for p in points]})
        check.chart(f"{model}: TTFT p99 against concurrency", "concurrency (streams)", "TTFT p99 (ms)",
                    {"TTFT p99": [(p.concurrency, p.ttft_p99_ms) for p in points if p.ttft_p99_ms is not None],
                     "SLO": [(points[0].concurrency, slo["ttft_p99_ms"].value), (points[-1].concurrency, slo["ttft_p99_ms"].value)]})
        check.measure("knee concurrency", verdict.knee, "streams", model=model)
        for point_c, judged in verdict.ttft:
            margin = f" (margin {judged.margin:+.4g} ms)" if judged.margin is not None else ""
            check.evidence(f"{model}: TTFT p99 at concurrency {point_c}: margin",
                           f"{judged.describe()}: {judged.outcome}{margin}")
        for c_from, c_to, judged in verdict.unsure_drops:
            check.finding(f"{model}: output tokens/s fell from {c_from} to {c_to} streams by more than "
                          f"curve_drop_tolerance, within the noise ({UNDECIDED}: {judged.describe()})",
                          severity="warning", model=model)
        best = verdict.best_within
        check.measure("max output tokens/s within TTFT SLO", round(best.tokens_per_s, 2) if best else 0.0, "tokens/s",
                      model=model)
        if best is None and verdict.too_close:
            undecided.append(f"{model}: {UNDECIDED}: no concurrency decided within the TTFT SLO; "
                             + "; ".join(f"at {c} streams {j.describe()}" for c, j in verdict.too_close))
        elif best is None:
            check.finding(f"{model}: no valid concurrency keeps TTFT p99 within {slo['ttft_p99_ms'].value:g} ms "
                          f"(at 1 stream it is {points[0].ttft_p99_ms} ms)", model=model)
        else:
            check.judge("capacity-within-ttft-slo", True, measured=f"TTFT p99 at {len(points)} concurrencies", model=model)
        for c_from, c_to, before, after in verdict.drops:
            check.finding(f"{model}: output tokens/s fell from {before:.0f} at {c_from} streams to {after:.0f} at "
                          f"{c_to}, before the knee", model=model, rule="curve-collapse")
        best_rps, tokens_per_request = requests_per_s[best.concurrency] if best else (0.0, None)
        lower_bound = capacity_is_lower_bound(points, best, _n(check, "curve_min_gain"))
        check.measure("max requests/s within TTFT SLO", round(best_rps, 2), "requests/s", model=model)
        check.measure("capacity is a lower bound", "yes" if lower_bound else "no", model=model)
        if lower_bound:
            check.finding(f"{model}: capacity >= {best.tokens_per_s:.0f} output tokens/s: tokens/s still rose within "
                          f"the TTFT SLO at the sweep's top ({best.concurrency} streams, "
                          "streaming_curve_max_concurrency)", severity="warning", model=model)
        triton_facts.publish(StreamingCapacity(
            model, max_output_tokens_per_s_within_slo=round(best.tokens_per_s, 2) if best else 0.0,
            max_requests_per_s_within_slo=round(best_rps, 3),
            output_tokens_per_request=round(tokens_per_request, 2) if tokens_per_request else None,
            concurrency=best.concurrency if best else None,
            ttft_p99_ms=best.ttft_p99_ms if best else points[0].ttft_p99_ms,
            instances=instance_count(triton.client.model_config(model)), lower_bound=lower_bound))
    reasons = (["curve not valid: " + "; ".join(invalid)] if invalid else []) + undecided
    if reasons:
        _not_valid(check, "; ".join(reasons))


# -- PERF-3 -------------------------------------------------------------------------------------------
def _server_rss(triton) -> float | None:
    pid = getattr(triton.launcher, "pid", None) if triton.owns_process else None
    if not pid:
        return None
    from pytest_triton_ready.soak.sampler import process_tree, rss_of

    try:
        return rss_of(process_tree(pid))
    except Exception:  # noqa: BLE001 - the server went away; the soak says so elsewhere
        return None


def _host_memory(triton) -> float | None:
    try:
        used = triton.scrape_metrics().select("nv_cpu_memory_used_bytes")
    except Exception:  # noqa: BLE001
        return None
    return used[0].value if used and used[0].value > 0 else None


@pytest.mark.triton_check("PERF-3")
def test_streaming_soak_every_request_finishes(triton, triton_settings, check):
    """For `streaming_soak_s`, streams at `streaming_concurrency`: every request gets its final
    response within `streaming_final_deadline_s` (a stuck request is named with its id and the
    tokens it got), nothing fails, and server memory (process tree RSS where the run owns the
    server, else the host's) does not grow by more than `streaming_memory_growth_max_mb`. A stream
    soak shorter than `soak_leak_min_duration_s`, or one that could not read server memory, has not
    judged that leak rule and is INCOMPLETE (waivable), naming the duration it needs."""
    models = _streaming_models(triton, check)
    soak_s = _n(check, "streaming_soak_s")
    if soak_s <= 0:
        check.incomplete("the stream soak is off (streaming_soak_s = 0)")
    concurrency = int(_n(check, "streaming_concurrency"))
    growth_max = check.threshold("streaming_memory_growth_max_mb")
    leak_min = _n(check, "soak_leak_min_duration_s")
    unjudged: list[str] = []
    for model in models:
        read_memory = (lambda: _server_rss(triton)) if _server_rss(triton) is not None else (lambda: _host_memory(triton))
        source = "server process tree RSS" if _server_rss(triton) is not None else "host memory (nv_cpu_memory_used_bytes)"
        load = _load(triton, _plan(triton, model), check, concurrency=concurrency, duration_s=soak_s, warmup_s=1.0)
        memory: list[tuple[float, float]] = []
        tokens: list[tuple[float, float]] = []
        started = time.monotonic()
        load.start()
        last_tokens = 0
        while load._thread is not None and load._thread.is_alive():
            time.sleep(1.0)
            now = time.monotonic() - started
            value = read_memory()
            if value is not None and now > 1.5:
                memory.append((round(now, 1), value / 1e6))
            total = load.tokens_so_far()
            tokens.append((round(now, 1), total - last_tokens))
            last_tokens = total
            progress.status(f"{model}: stream soak {now:.0f} of {soak_s:g} s, {concurrency} streams, "
                            f"{total} tokens" + (f", memory {memory[-1][1]:.0f} MB" if memory else ""))
        stats = load.wait().stats
        check.setting("soak duration", round(soak_s, 1), "s", model=model, source="streaming_soak_s")
        check.measure("requests completed", stats.completed, "requests", model=model)
        check.measure("output tokens/s", round(stats.output_tokens_per_s, 2), "tokens/s", model=model)
        check.measure("TTFT p99", stats.ttft_ms["p99"], "ms", model=model)
        check.measure("stuck requests", len(stats.stuck), "requests", model=model, threshold=0,
                      finding=f"{model}: {len(stats.stuck)} of {stats.attempted} requests never got their final response "
                              f"within {_n(check, 'streaming_final_deadline_s'):g} s")
        report_stuck(check, model, stats.stuck)
        check.measure("failed requests", stats.count_errors, "requests", model=model, threshold=0)
        for reason, count in stats.errors.items():
            check.evidence(f"{model} errors", f"{count} x {reason}")
        growth = fitted_growth(memory)
        if len(memory) >= 3:
            judged = soak_s >= leak_min
            check.measure(f"memory growth ({source})", round(growth, 1), "MB", model=model,
                          threshold=growth_max if judged else None)
            if not judged:
                unjudged.append(f"{model}: the memory-leak rule (streaming_memory_growth_max_mb) was not judged: a "
                                f"stream soak of {soak_s:g} s, and telling a leak from warm-up needs "
                                f"soak_leak_min_duration_s = {leak_min:g} s (streaming_soak_s = {leak_min:g} or longer)")
            if not judged and growth > growth_max.value:
                check.finding(f"{model}: memory grew {growth:.0f} MB over a {soak_s:g} s stream soak; a soak shorter than "
                              f"{leak_min:g} s cannot tell a leak from warm-up", severity="warning", model=model)
            check.chart(f"{model}: memory during the stream soak", "time (s)", "MB", {source: memory})
        else:
            unjudged.append(f"{model}: server memory could not be read during the stream soak, so the memory-leak "
                            "rule (streaming_memory_growth_max_mb) was not judged")
        check.chart(f"{model}: output tokens per second during the stream soak", "time (s)", "tokens", {"tokens": tokens})
        if stats.stuck:
            check.recommend("A stream without its final response holds a client forever: make sure the model sends "
                            "TRITONSERVER_RESPONSE_COMPLETE_FINAL on every path (errors and cancellation included).")
    if unjudged and not check.errors:
        check.incomplete("; ".join(unjudged))


# -- PERF-4 -------------------------------------------------------------------------------------------
@pytest.mark.triton_check("PERF-4")
def test_streaming_cancellation_leaves_instances_serving(triton, check):
    """Streams cancelled by their clients mid-generation (gRPC cancellation) leave every instance
    serving: within `streaming_cancel_recovery_max_s`, 2 x instances concurrent requests all end
    with a final response, and the server stays ready."""
    models = _streaming_models(triton, check)
    recovery_max = check.threshold("streaming_cancel_recovery_max_s")
    for model in models:
        plan = _plan(triton, model)
        senders = 2 * instance_count(triton.client.model_config(model))
        load = _load(triton, plan, check, concurrency=senders, max_tokens=int(_n(check, "streaming_max_tokens")) * 8).start()
        deadline = time.monotonic() + 10
        while load.tokens_so_far() < senders and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.3)
        cancelled = load.stop(cancel=True).in_flight_at_stop
        check.measure("streams cancelled mid-generation", len(cancelled), "streams", model=model, threshold=1, comparison=">=",
                      finding=f"{model}: no stream was in flight to cancel (every request ended within a second)")
        check.evidence(f"{model} cancelled", "; ".join(f"{s.id} after {s.tokens} tokens" for s in cancelled[:10]))
        started = time.monotonic()
        served_s = None
        last = None
        while time.monotonic() - started < recovery_max.value:
            last = _load(triton, plan, check, concurrency=senders, duration_s=1.0, max_tokens=4).run().stats
            if last.completed >= senders and not last.errors and not last.stuck:
                served_s = time.monotonic() - started
                break
        check.measure("every instance serving after cancellation", round(served_s, 2) if served_s is not None else None,
                      "s", model=model, threshold=recovery_max,
                      finding=f"{model}: after cancelling {len(cancelled)} streams, requests still failed or hung "
                              f"{recovery_max.value:g} s later: {last.to_dict() if last else 'no answer'}")
        # compared with the start: a model that failed to load keeps /v2/health/ready at 400 throughout
        check.measure("server ready after cancellation (as at the start)", initial_state_of(triton).restored(triton.client),
                      model=model, threshold=True, comparison="==")


def _stream_fault(faults, check, experiment, model, **options):
    """Run a streaming fault experiment (faults/stream_experiments.py) through the one skeleton and
    record its timeline; INCOMPLETE with the reason when it could not judge anything."""
    outcome = run_experiment(experiment(faults, model, max_tokens=int(_n(check, "streaming_max_tokens")),
                                        deadline_s=_n(check, "streaming_final_deadline_s"), **options))
    record_outcome(check, outcome)
    if outcome.incomplete:
        check.incomplete(outcome.incomplete)
    return outcome


@pytest.mark.triton_check("PERF-4")
def test_streaming_sigterm_ends_streams_cleanly(triton, faults, check):
    """SIGTERM to a server this run owns, with streams in flight (open loop): every request in
    flight at the signal ends with its final response (at most `shutdown_lost_requests_max` cut
    off without one), none hangs, and the server exits by itself with code 0 within its exit
    timeout. The server's log says whether it counted those streams as in-flight inferences when
    it began to drain; when it did not, it unloaded the model under live streams, which is named
    (a warning when nothing was lost this time). Nothing in flight at the signal: INCOMPLETE (the
    drain was not exercised). The server is started again afterwards."""
    model = _streaming_models(triton, check)[0]
    outcome = _stream_fault(faults, check, StreamingSigterm, model)
    version = initial_state_of(triton).server_version  # read before the signal: the server may not be back
    judge_streaming_sigterm(check, outcome, version)



@pytest.mark.triton_check("PERF-4")
def test_streaming_dead_stub_is_reported_and_recovers(triton, faults, check):
    """With streams running, SIGKILL one python backend stub of the decoupled model: the streams it
    served end (an error, never a hang past `streaming_final_deadline_s`), the ready endpoints stop
    answering 200 (model readiness shows a dead stub from Triton 2.64, strict server readiness from
    2.68; the finding says which this server is), and unload + load brings streaming back within
    `instance_recovery_max_s`. A kill that did not take (no stream failed or hung): INCOMPLETE."""
    model = _streaming_models(triton, check)[0]
    if faults.owns_process and not faults.stubs(model):
        check.not_applicable(f"{model} runs no python backend stub this run can see")
    version = triton.client.server_metadata().get("version", "?")
    outcome = _stream_fault(faults, check, StreamingDeadStub, model,
                            recovery_max_s=_n(check, "instance_recovery_max_s"))
    judge_streaming_dead_stub(check, outcome, version)
