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
MON-1: the server's first-response histogram agrees with the client's TTFT.
A deployment without decoupled models gets NOT APPLICABLE for each.
"""

from __future__ import annotations

import time

import pytest

from pytest_triton_ready.load.streaming import (
    StreamingLoad,
    StreamingPlan,
    expected_tokens,
    generate_stream,
    sse_body,
    stream_once,
)
from pytest_triton_ready.load.streaming_rules import (
    FIRST_RESPONSE_FAMILIES,
    CurvePoint,
    bucket_delta,
    capacity_is_lower_bound,
    fitted_growth,
    histogram_buckets,
    histogram_quantile,
    judge_curve,
    read_shutdown_log,
    streaming_slo,
)
from pytest_triton_ready.models import instance_count, ready_decoupled_models
from pytest_triton_ready.report import progress

pytestmark = pytest.mark.usefixtures("triton")

PROMPT = "is this deployment ready for production"


def _streaming_models(triton, check) -> list[str]:
    models = ready_decoupled_models(triton)
    if not models:
        check.not_applicable("no READY decoupled (streaming) model in scope")
    return models


def _plan(triton, model) -> StreamingPlan:
    client = triton.client
    return StreamingPlan.from_metadata(model, client.model_metadata(model), client.model_config(model))


def _n(check, name) -> float:
    return check.threshold(name).value


def _load(triton, plan, check, **kwargs) -> StreamingLoad:
    kwargs.setdefault("max_tokens", int(_n(check, "streaming_max_tokens")))
    kwargs.setdefault("deadline_s", _n(check, "streaming_final_deadline_s"))
    return StreamingLoad(triton.endpoints.grpc_url, plan, headers=triton.settings.headers, **kwargs)


def _is_demo_generate(plan: StreamingPlan) -> bool:
    return (plan.prompt_input, plan.max_tokens_input, plan.token_output) == ("PROMPT", "MAX_TOKENS", "TOKEN")


def _report_stuck(check, model, stats, limit=10) -> None:
    for stuck in stats.stuck[:limit]:
        check.finding(f"{model}: {stuck.describe()} (a stream whose final flag never came)", model=model,
                      rule="final-flag", value=stuck.id)
    if len(stats.stuck) > limit:
        check.finding(f"{model}: {len(stats.stuck) - limit} more stuck requests", model=model, rule="final-flag")


# -- CFG-1 --------------------------------------------------------------------------------------------
@pytest.mark.triton_check("CFG-1")
def test_streaming_answers_end_with_final_flag(triton, check):
    """Every decoupled model answers a real streamed request over gRPC with output and a final
    response (`triton_final_response`) within the deadline, answers the same prompt the same way
    twice, and its HTTP generate_stream answer carries no error in any chunk."""
    models = _streaming_models(triton, check)
    deadline = _n(check, "streaming_final_deadline_s")
    for model in models:
        plan = _plan(triton, model)
        check.evidence(f"{model} request plan", f"prompt input {plan.prompt_input}, token budget input "
                       f"{plan.max_tokens_input}, tokens counted from output {plan.token_output}")
        first = stream_once(triton.endpoints.grpc_url, plan, PROMPT, 8, timeout_s=deadline, headers=triton.settings.headers)
        if first.error:
            check.finding(f"{model}: the streamed request failed: {first.error}", model=model)
            check.evidence(f"{model} error", first.error)
            continue
        check.measure("final flag received", first.final, model=model, threshold=True, comparison="==",
                      finding=f"{model}: request {first.id} got {first.tokens} tokens in {first.responses} responses and "
                              f"no final response within {deadline:g} s")
        check.measure("output tokens", first.tokens, "tokens", model=model, threshold=1, comparison=">=",
                      finding=f"{model}: the answer carried no output in {plan.token_output}")
        if first.ttft_s is not None:
            check.measure("time to first token", round(first.ttft_s * 1000, 3), "ms", model=model)
        if _is_demo_generate(plan) and first.final:
            expected = expected_tokens(PROMPT, 8)
            if first.text != expected:
                check.finding(f"{model}: answered {first.text}, expected {expected}", model=model, rule="answer")
        again = stream_once(triton.endpoints.grpc_url, plan, PROMPT, 8, timeout_s=deadline, headers=triton.settings.headers)
        if first.final and again.final and again.text != first.text:
            check.finding(f"{model}: the same prompt gave different answers on two requests", severity="warning",
                          model=model, rule="determinism")
        sse = generate_stream(triton.endpoints.http_url, model, sse_body(plan, PROMPT, 4),
                              timeout_s=deadline, headers=triton.settings.headers)
        check.measure("generate_stream chunks", len(sse.chunks), "chunks", model=model)
        if sse.error:
            where = "under HTTP 200, in a chunk" if sse.status == 200 else f"HTTP {sse.status}"
            check.finding(f"{model}: generate_stream answered an error ({where}): {sse.error}", severity="warning",
                          model=model, rule="generate-stream")
            check.evidence(f"{model} generate_stream", str(sse.chunks[-3:]) + " " + sse.error)


# -- MON-1 --------------------------------------------------------------------------------------------
@pytest.mark.triton_check("MON-1")
def test_streaming_first_response_histogram_matches_ttft(triton, triton_metrics, check):
    """Where the server exports a first-response histogram for a decoupled model (Triton 2.52+
    with histogram latencies, vLLM's `vllm:time_to_first_token_seconds`), its median over a short
    load agrees with the client's TTFT median within `streaming_ttft_agreement_ms`."""
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
        check.measure("client TTFT p50", client_p50, "ms", model=model)
        for family, scale, label, source in FIRST_RESPONSE_FAMILIES:
            buckets = bucket_delta(histogram_buckets(before, family, label, model),
                                   histogram_buckets(after, family, label, model))
            server_p50 = histogram_quantile(buckets, 0.5)
            if server_p50 is None:
                continue
            compared += 1
            server_ms = server_p50 * scale
            check.measure(f"server first response p50 ({family})", round(server_ms, 3), "ms", model=model)
            if client_p50 is not None:
                check.measure("TTFT gap, client - server", round(abs(client_p50 - server_ms), 3), "ms", model=model,
                              threshold=agreement,
                              finding=f"{model}: {source} puts the first response at {server_ms:.1f} ms (median), "
                                      f"the client measured {client_p50:.1f} ms: one of the two is not measuring TTFT")
        families = sorted({n.split("_bucket")[0] for n in after.names
                           if n.startswith(("nv_trt_llm_", "vllm:"))})
        if families:
            check.evidence(f"{model}: LLM backend metric families", ", ".join(families))
    if not compared:
        check.caveat(f"Triton {version} exports no first-response histogram for these models: "
                     "nv_inference_first_response_histogram_ms needs 2.52+ with --metrics-config "
                     "histogram_latencies=true for decoupled models (all models from 26.01); the client's TTFT "
                     "is the only measure")
        check.not_applicable(f"no server-side first-response histogram on Triton {version} (2.52+ with "
                             "histogram_latencies=true, or the vLLM backend); client TTFT recorded")


# -- PERF-1 -------------------------------------------------------------------------------------------
@pytest.mark.triton_check("PERF-1")
def test_streaming_slo_at_target_load(triton, triton_settings, triton_facts, check):
    """At the target load (`streaming_concurrency` streams, closed loop) TTFT p99 and ITL p99 are
    within the model's SLO (`ttft_p99_ms`, `itl_p99_ms`), output tokens/s reaches
    `min_output_tokens_per_s` where set, every request succeeds (`success_rate_min`) and none is stuck."""
    models = _streaming_models(triton, check)
    concurrency = int(_n(check, "streaming_concurrency"))
    duration = _n(check, "streaming_duration_s")
    success_min = check.threshold("success_rate_min")
    facts = triton_facts.setdefault("streaming.perf1", {})
    for model in models:
        slo = streaming_slo(triton_settings, model)
        result = _load(triton, _plan(triton, model), check, concurrency=concurrency, duration_s=duration,
                       warmup_s=1.0).run()
        stats = result.stats
        check.measure("streams (concurrency)", concurrency, "streams", model=model)
        check.measure("requests completed", stats.completed, "requests", model=model)
        check.measure("TTFT p50", stats.ttft_ms["p50"], "ms", model=model)
        check.measure("TTFT p99", stats.ttft_ms["p99"], "ms", model=model, threshold=slo["ttft_p99_ms"],
                      finding=f"{model}: TTFT p99 is {stats.ttft_ms['p99']} ms, the SLO is <= {slo['ttft_p99_ms'].value:g} ms")
        check.measure("ITL p50", stats.itl_ms["p50"], "ms", model=model)
        check.measure("ITL p99", stats.itl_ms["p99"], "ms", model=model, threshold=slo["itl_p99_ms"])
        check.measure("request latency p50", stats.latency_ms["p50"], "ms", model=model)
        check.measure("request latency p99", stats.latency_ms["p99"], "ms", model=model)
        tokens_threshold = slo["min_output_tokens_per_s"] if slo["min_output_tokens_per_s"].value > 0 else None
        check.measure("output tokens/s", round(stats.output_tokens_per_s, 2), "tokens/s", model=model,
                      threshold=tokens_threshold, comparison=">=")
        check.measure("output tokens/s per stream (lowest)", round(stats.min_user_tokens_per_s or 0.0, 2), "tokens/s", model=model)
        check.measure("responses/s", round(stats.responses_per_s, 2), "responses/s", model=model)
        check.measure("success rate", stats.success_rate, "ratio", model=model, threshold=success_min, comparison=">=")
        check.measure("stuck requests", len(stats.stuck), "requests", model=model, threshold=0)
        _report_stuck(check, model, stats)
        for reason, count in stats.errors.items():
            check.evidence(f"{model} errors", f"{count} x {reason}")
        check.chart(f"{model}: TTFT, ITL and latency percentiles at {concurrency} streams", "percentile", "ms",
                    {name: [(float(k[1:]), v) for k, v in values.items() if v is not None]
                     for name, values in (("TTFT", stats.ttft_ms), ("ITL", stats.itl_ms), ("request latency", stats.latency_ms))})
        check.evidence(f"{model} streaming measurement", str(stats.to_dict()))
        facts[model] = {"ttft_p99_ms": stats.ttft_ms["p99"], "itl_p99_ms": stats.itl_ms["p99"],
                        "output_tokens_per_s": round(stats.output_tokens_per_s, 2), "concurrency": concurrency}
        if stats.ttft_ms["p99"] is not None and stats.ttft_ms["p99"] > slo["ttft_p99_ms"].value:
            check.recommend("TTFT over budget: fewer requests per instance (more instances or a smaller "
                            "concurrent_requests / max_num_seqs), a shorter prefill, or a budget that matches the model.")


# -- PERF-2 -------------------------------------------------------------------------------------------
@pytest.mark.triton_check("PERF-2")
def test_streaming_tokens_and_ttft_curve(triton, triton_settings, triton_facts, check):
    """Sweep concurrency 1, 2, 4 ... `streaming_curve_max_concurrency`: tokens/s must not fall by
    more than `curve_drop_tolerance` before the knee, and at least one point must keep TTFT p99
    within the SLO. Publishes the best tokens/s within SLO, and the requests/s at that point, as
    `triton_facts["perf.streaming_capacity"]` (OPS-2 plans a decoupled model's capacity from it); a
    best point at the sweep's top where tokens/s still rose by `curve_min_gain` is a lower bound."""
    models = _streaming_models(triton, check)
    top = int(_n(check, "streaming_curve_max_concurrency"))
    point_s = _n(check, "streaming_curve_point_s")
    capacity = triton_facts.setdefault("perf.streaming_capacity", {})
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
            points.append(CurvePoint(concurrency, stats.output_tokens_per_s, stats.ttft_ms["p99"]))
            requests_per_s[concurrency] = (stats.requests_per_s,
                                           stats.output_tokens / stats.completed if stats.completed else None)
            check.measure(f"output tokens/s at concurrency {concurrency}", round(stats.output_tokens_per_s, 2), "tokens/s", model=model)
            check.measure(f"TTFT p99 at concurrency {concurrency}", stats.ttft_ms["p99"], "ms", model=model)
            check.measure(f"requests/s at concurrency {concurrency}", round(stats.requests_per_s, 2), "requests/s",
                          model=model)
            if stats.stuck:
                _report_stuck(check, model, stats, limit=3)
            concurrency *= 2
        verdict = judge_curve(points, slo["ttft_p99_ms"].value, _n(check, "curve_knee_fraction"),
                              _n(check, "curve_drop_tolerance"))
        check.chart(f"{model}: output tokens/s against concurrency", "concurrency (streams)", "output tokens/s",
                    {"tokens/s": [(p.concurrency, round(p.tokens_per_s, 2)) for p in points]})
        check.chart(f"{model}: TTFT p99 against concurrency", "concurrency (streams)", "TTFT p99 (ms)",
                    {"TTFT p99": [(p.concurrency, p.ttft_p99_ms) for p in points if p.ttft_p99_ms is not None],
                     "SLO": [(points[0].concurrency, slo["ttft_p99_ms"].value), (points[-1].concurrency, slo["ttft_p99_ms"].value)]})
        check.measure("knee concurrency", verdict.knee, "streams", model=model)
        best = verdict.best_within
        check.measure("max output tokens/s within TTFT SLO", round(best.tokens_per_s, 2) if best else 0.0, "tokens/s",
                      model=model)
        if best is None:
            check.finding(f"{model}: no concurrency keeps TTFT p99 within {slo['ttft_p99_ms'].value:g} ms "
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
        capacity[model] = {"max_output_tokens_per_s_within_slo": round(best.tokens_per_s, 2) if best else 0.0,
                           "max_requests_per_s_within_slo": round(best_rps, 3),
                           "output_tokens_per_request": round(tokens_per_request, 2) if tokens_per_request else None,
                           "concurrency": best.concurrency if best else None,
                           "ttft_p99_ms": best.ttft_p99_ms if best else points[0].ttft_p99_ms,
                           "instances": instance_count(triton.client.model_config(model)),
                           "lower_bound": lower_bound}


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
        _report_stuck(check, model, stats)
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
def _streams_serve(triton, plan, check, senders: int) -> bool:
    """Every one of `senders` concurrent streams gets complete answers for a second."""
    stats = _load(triton, plan, check, concurrency=senders, duration_s=1.0, max_tokens=4, deadline_s=3.0).run().stats
    return stats.completed >= senders and not stats.errors and not stats.stuck


def _restore_streaming(triton, faults, plan, check, senders: int) -> str | None:
    """The server up and ready, and the streaming model answering on every instance: unload + load
    when it does not (the fault injector's own probe speaks unary inference, which decoupled
    models refuse). None, or why not."""
    error = faults.restore(None)
    if error:
        return error
    if _streams_serve(triton, plan, check, senders):
        return None
    limit = check.threshold("instance_recovery_max_s").value
    try:
        faults.unload_and_load(plan.model)
    except Exception as exc:  # noqa: BLE001 - said in the finding
        return f"unload + load of {plan.model} failed: {exc}"
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if _streams_serve(triton, plan, check, senders):
            return None
    return f"{plan.model} did not stream on every instance within {limit:g} s of unload + load"


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
        check.measure("server ready after cancellation", triton.client.ready(), model=model, threshold=True, comparison="==")


@pytest.mark.triton_check("PERF-4")
def test_streaming_sigterm_ends_streams_cleanly(triton, faults, check):
    """SIGTERM to a server this run owns, with streams in flight (open loop): every request in
    flight at the signal ends with its final response (at most `shutdown_lost_requests_max` cut
    off without one), none hangs, and the server exits by itself with code 0 within its exit
    timeout. The server's log says whether it counted those streams as in-flight inferences when
    it began to drain; when it did not, it unloaded the model under live streams, which is named
    (a warning when nothing was lost this time). The server is started again afterwards."""
    models = _streaming_models(triton, check)
    if not triton.owns_process:
        check.incomplete(f"the server is attached ({triton.launcher.name}), not owned by this run: no SIGTERM is sent")
    model = models[0]
    plan = _plan(triton, model)
    exit_timeout = float(getattr(triton.launcher, "exit_timeout_s", 30))
    senders = 2 * instance_count(triton.client.model_config(model))
    load = _load(triton, plan, check, rate=float(senders * 2), users=senders,
                 max_tokens=int(_n(check, "streaming_max_tokens")) * 4, deadline_s=exit_timeout + 5, keep_records=100_000)
    load.start()
    exit_s = exit_code = None
    try:
        deadline = time.monotonic() + 10
        while (load.tokens_so_far() < senders or load.in_flight() == 0) and time.monotonic() < deadline:
            time.sleep(0.05)
        triton.client.reconnect()  # an idle keep-alive connection would hold the server until its exit timeout
        in_flight = load.in_flight()
        sigterm_at = time.monotonic()
        load.event("SIGTERM")
        faults.terminate_server()
        # The clients keep their streams until the requests in flight at the signal have ended,
        # then close them, as clients behind a draining load balancer do: on Triton 2.51 an open
        # stream keeps its decoupled model loaded, and the server exits only at its exit timeout.
        while load.in_flight_sent_before(sigterm_at) and time.monotonic() - sigterm_at < exit_timeout:
            if faults.processes.exit_code() is not None:
                break
            time.sleep(0.05)
        drained_s = time.monotonic() - sigterm_at
        result = load.stop()
        closed_s = time.monotonic() - sigterm_at
        while time.monotonic() - sigterm_at < exit_timeout + 10:
            if faults.processes.exit_code() is not None:
                exit_s = time.monotonic() - sigterm_at
                break
            time.sleep(0.05)
        exit_code = faults.processes.exit_code()
        log = triton.server_log(200)
    finally:
        restore_error = faults.restore(None)
    at_signal = [r for r in result.records if r.sent and r.sent < sigterm_at and (r.end is None or r.end >= sigterm_at)]
    finished = [r for r in at_signal if r.final]
    cut = [r for r in at_signal if not r.final and r.error and "stream closed before the final response" in r.error]
    failed = [r for r in at_signal if not r.final and r not in cut]
    check.measure("streams in flight at SIGTERM", len(at_signal) or in_flight, "streams", model=model)
    check.measure("of them ended with the final response", len(finished), "streams", model=model)
    check.measure("of them cut off without a final response", len(cut), "streams", model=model,
                  threshold=check.threshold("shutdown_lost_requests_max"),
                  finding=f"{model}: {len(cut)} streams in flight at SIGTERM were cut off without their final response: "
                          + "; ".join(f"{r.id} after {r.tokens} tokens" for r in cut[:5]))
    for r in failed[:5]:
        check.finding(f"{model}: request {r.id}, in flight at SIGTERM, ended with an error after {r.tokens} tokens: "
                      f"{r.error}", severity="warning", model=model)
    shutdown = read_shutdown_log(log, model)
    version = triton.client.server_metadata().get("version", "?") if not restore_error else "?"
    unseen = bool(at_signal) and shutdown.counted == 0  # Triton drained nothing: it unloaded under live streams
    if shutdown.counted is not None:
        check.measure("in-flight inferences Triton counted at SIGTERM", shutdown.counted, "requests", model=model)
    held = shutdown.exit_timeout or (exit_s or 0) > exit_timeout
    check.measure("server exit after SIGTERM", round(exit_s, 2) if exit_s is not None else None, "s", model=model,
                  threshold=exit_timeout,
                  finding=f"{model}: the server did not exit within its exit timeout ({exit_timeout:g} s) after SIGTERM"
                          + (f": the model stayed loaded ({shutdown.live_lines} log lines 'Found N live models') "
                             f"although every client stream had closed {closed_s:.1f} s after the signal"
                             if held and shutdown.live_lines and not shutdown.aborted else ""))
    check.measure("exit code", exit_code, model=model, threshold=0, comparison="==",
                  finding=f"{model}: the server exited with code {exit_code} after SIGTERM with streams in flight"
                          + (f": it aborted ({shutdown.aborted})" if shutdown.aborted else "")
                          + (" while it was unloading the model under streams it had not counted as in flight"
                             if shutdown.aborted and unseen else ""))
    if unseen:
        check.finding(f"{model}: Triton {version} counted none of the {len(at_signal)} streams in flight at SIGTERM as "
                      "in-flight inferences (its log: 'Found 0 model versions that have in-flight inferences') and "
                      "began to unload the model while they were still being written: the python backend releases a "
                      "request when execute() returns, and the drain waits only for requests not yet released; an "
                      "abort in the gRPC frontend in that window cuts every stream", model=model, rule="shutdown-drain",
                      severity="error" if check.errors else "warning")
        check.recommend(f"{model}: keep every request inside Triton until its final response (iterative sequence "
                        "batching, rescheduling unfinished requests with TRITONSERVER_REQUEST_RELEASE_RESCHEDULE, "
                        "as the demo `generate` does), so SIGTERM drains the streams before it unloads the model; "
                        "from Triton 2.58 (25.05) the gRPC frontend also waits for open streams before the server "
                        "stops (server PR #7969).")
    check.measure("in-flight streams finished after SIGTERM", round(drained_s, 2), "s", model=model)
    check.measure("client streams closed after SIGTERM", round(closed_s, 2), "s", model=model)
    check.measure("streams left hanging", len(result.stats.stuck) + len(result.in_flight_at_stop), "streams",
                  model=model, threshold=0)
    _report_stuck(check, model, result.stats)
    for reason, count in result.stats.errors.items():
        check.evidence(f"{model} errors around SIGTERM", f"{count} x {reason}")
    check.evidence("server log at shutdown", log[log.rfind("Signal (15) received"):] if "Signal (15) received" in log else log[-3000:])
    if restore_error:
        check.finding(f"the server was not restored after the experiment: {restore_error}")


@pytest.mark.triton_check("PERF-4")
def test_streaming_dead_stub_is_reported_and_recovers(triton, faults, check):
    """With streams running, SIGKILL one python backend stub of the decoupled model: the streams it
    served end (an error, never a hang past `streaming_final_deadline_s`), the ready endpoints stop
    answering 200 (model readiness shows a dead stub from Triton 2.64, strict server readiness from
    2.68; the finding says which this server is), and unload + load brings streaming back within
    `instance_recovery_max_s`."""
    from pytest_triton_ready.client import http_status
    from pytest_triton_ready.load.streaming_rules import readiness_gates

    models = _streaming_models(triton, check)
    if not triton.owns_process:
        check.incomplete(f"the server is attached ({triton.launcher.name}), not owned by this run: no stub is killed")
    model = models[0]
    if not faults.stubs(model):
        check.not_applicable(f"{model} runs no python backend stub this run can see")
    version = triton.client.server_metadata().get("version", "?")
    gates = readiness_gates(version)
    plan = _plan(triton, model)
    senders = 2 * instance_count(triton.client.model_config(model))
    http = triton.endpoints.http_url
    load = _load(triton, plan, check, concurrency=senders, max_tokens=int(_n(check, "streaming_max_tokens")) * 4).start()
    model_ready, server_ready = [], []
    try:
        deadline = time.monotonic() + 10
        while load.tokens_so_far() < senders and time.monotonic() < deadline:
            time.sleep(0.05)
        dead = faults.kill_stub(model)
        load.event(f"SIGKILL {dead.instance}")
        until = time.monotonic() + 3.0
        while time.monotonic() < until:
            model_ready.append(http_status(f"{http}/v2/models/{model}/ready"))
            server_ready.append(http_status(f"{http}/v2/health/ready"))
            time.sleep(0.25)
        result = load.stop()
    finally:
        started = time.monotonic()
        restore_error = _restore_streaming(triton, faults, plan, check, senders)
        recovered_s = time.monotonic() - started
    stats = result.stats
    check.measure("requests failed after the stub died", stats.count_errors, "requests", model=model)
    check.measure("streams left hanging by the dead stub", len(stats.stuck) + len(result.in_flight_at_stop), "streams",
                  model=model, threshold=0)
    _report_stuck(check, model, stats)
    for reason, count in stats.errors.items():
        check.evidence(f"{model} errors after the stub died", f"{count} x {reason}")
    check.measure(f"/v2/models/{model}/ready while the stub was dead", ", ".join(sorted({str(s) for s in model_ready})),
                  model=model)
    check.measure("/v2/health/ready while the stub was dead", ", ".join(sorted({str(s) for s in server_ready})), model=model)
    if 200 in model_ready[-3:] or 200 in server_ready[-3:]:
        expected = [k for k, v in gates.items() if v]
        check.finding(f"{model}: stub {dead.instance} was dead, yet /v2/models/{model}/ready answered "
                      f"{sorted(set(model_ready))} and /v2/health/ready {sorted(set(server_ready))}: Triton {version} "
                      + ("should have shown it (" + "; ".join(expected) + ")" if expected else
                         "shows a dead python stub on model readiness only from 2.64 (25.12) and on strict server "
                         "readiness from 2.68 (26.04)"), model=model, rule="readiness")
        check.recommend("Probe streaming models with real streamed requests that reach every instance (as CFG-1 "
                        "does), not with the ready endpoints alone, and recover a dead stub with unload + load.")
    check.measure("streaming again after unload + load", round(recovered_s, 2) if not restore_error else None, "s",
                  model=model, threshold=check.threshold("instance_recovery_max_s"))
    if restore_error:
        check.finding(f"{model}: {restore_error}", model=model)
