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

import json
import time

import pytest

from pytest_triton_ready import budget
from pytest_triton_ready.config.streaming_answers import check_answers
from pytest_triton_ready.facts import StreamingCapacity
from pytest_triton_ready.faults.stream_experiments import StreamingDeadStub, StreamingSigterm
from pytest_triton_ready.faults.stream_judges import judge_streaming_dead_stub, judge_streaming_sigterm
from pytest_triton_ready.faults.stream_traffic import run_streaming_fault
from pytest_triton_ready.load.streaming.run import StreamingRun
from pytest_triton_ready.monitoring.streaming_agreement import no_histogram_caveat, probe_agreement
from pytest_triton_ready.performance.streaming_curve import not_enough_valid, record_stream_capacity, record_stream_curve, sweep_streams
from pytest_triton_ready.performance.streaming_rules import streaming_slo
from pytest_triton_ready.performance.streaming_target import measure_streams_at_target, record_at_target
from pytest_triton_ready.policy import policy, require_allowed
from pytest_triton_ready.server.models import initial_state_of, instance_count
from pytest_triton_ready.soak.evidence import IDENTITY_LABEL
from pytest_triton_ready.soak.streaming import (
    record_stream_soak,
    soak,
    stream_evidence_stands_in,
    stream_soak_identity,
    stream_soak_off,
)

pytestmark = pytest.mark.usefixtures("triton")


@pytest.fixture(scope="session")
def streamed_models() -> set:
    """The (model, server changes) this run already streamed to: their re-warm-up is shorter."""
    return set()


@pytest.fixture
def streaming(triton, check, streamed_models) -> StreamingRun:
    """The streaming checks' view of the run (load/streaming/run.py): the READY decoupled models
    (NOT APPLICABLE without one), their request plans, streamed load with the check's token budget
    and deadline, and measurements that stop once their rules are decided; every load under the
    attach policy and ceiling, the run budget and the warm-up thresholds, as the unary `load`."""
    run_budget, check_id = budget.running_check()
    return StreamingRun(triton, check, policy(triton.settings), run_budget, check_id, streamed_models)


# -- CFG-1 --------------------------------------------------------------------------------------------
@pytest.mark.triton_check("CFG-1")
def test_streaming_answers_end_with_final_flag(streaming, check):
    """Every decoupled model answers a real streamed request over gRPC with output and a final
    response (`triton_final_response`) within the deadline; every response's outputs keep the
    declared contract (names, datatypes, shapes); the answers match the team's `expectations:`
    (and a data file's validation_data) where declared; the same request answered twice gives the
    same answer (an error where the model is declared deterministic, else a warning); its HTTP
    generate_stream answer carries no error in any chunk."""
    for model in streaming.models():
        check_answers(streaming, model)


# -- MON-1 --------------------------------------------------------------------------------------------
@pytest.mark.triton_check("MON-1")
def test_streaming_first_response_histogram_matches_ttft(streaming, triton, triton_metrics, check):
    """Over a short streamed load, the server's success counter (nv_inference_request_success) of
    each decoupled model counts at least every request the client completed (the metrics see the
    streamed traffic), and where the server exports a first-response histogram (Triton 2.52+ with
    histogram latencies, vLLM's `vllm:time_to_first_token_seconds`) its median agrees with the
    client's TTFT median within `streaming_ttft_agreement_ms`. Where no histogram exists, the
    caveat says that TTFT agreement was not judged and what it needs; a counter the endpoint does
    not export makes the check INCOMPLETE naming it."""
    models = streaming.models()
    version = triton.client.server_metadata().get("version", "?")
    compared = sum(probe_agreement(streaming, triton_metrics, model) for model in models)
    if not compared:
        check.caveat(no_histogram_caveat(version))


# -- PERF-1 -------------------------------------------------------------------------------------------
@pytest.mark.triton_check("PERF-1")
def test_streaming_slo_at_target_load(streaming, triton_settings, triton_facts, check):
    """At the target load (`streaming_concurrency` streams, closed loop) TTFT p99 and ITL p99 are
    within the model's SLO (`ttft_p99_ms`, `itl_p99_ms`), output tokens/s reaches
    `min_output_tokens_per_s` where set, every request succeeds (`success_rate_min`) and none is stuck.
    TTFT p99, ITL p99 and tokens/s are decided on their `load_confidence` intervals (the requests cut
    into windows of about `load_window_s` by their end): one whose interval straddles its threshold
    is too close to call. A measurement with fewer than `streaming_min_requests` completed requests
    is not valid, and a rule too close to call is not decided: the check is INCOMPLETE for either
    (unless it failed on another rule)."""
    models = streaming.models()
    reasons: list[str] = []
    for index, model in enumerate(models):
        measured = measure_streams_at_target(streaming, model, streaming_slo(triton_settings, model), len(models) - index)
        reasons += record_at_target(check, measured)
        triton_facts.publish(measured.fact())
    streaming.not_valid(reasons)


# -- PERF-2 -------------------------------------------------------------------------------------------
@pytest.mark.triton_check("PERF-2")
def test_streaming_tokens_and_ttft_curve(streaming, triton, triton_settings, triton_facts, check):
    """Sweep concurrency 1, 2, 4 ... `streaming_curve_max_concurrency`: tokens/s must not fall by
    more than `curve_drop_tolerance` before the knee, and at least one point must keep TTFT p99
    within the SLO. Publishes the best tokens/s within SLO, and the requests/s at that point, as
    a `StreamingCapacity` fact (OPS-2 plans a decoupled model's capacity from it); a
    best point at the sweep's top where tokens/s still rose by `curve_min_gain` is a lower bound.
    Only points with at least `streaming_min_requests` completed requests, a success rate of at
    least `success_rate_min` and no stuck request count for the knee and the capacity; a model with
    fewer than half of its points (or two) valid makes the check INCOMPLETE and publishes no capacity.
    On an attached server the sweep needs the saturate permission (INCOMPLETE naming it without)."""
    models = streaming.models()
    require_allowed(check, triton.settings, "saturate", "the stream sweep drives every decoupled model to saturation")
    reasons: list[str | None] = []
    for index, model in enumerate(models):
        budget_ms = streaming_slo(triton_settings, model)["ttft_p99_ms"].value
        swept = sweep_streams(streaming, model, budget_ms, len(models) - index)
        invalid = not_enough_valid(model, swept, streaming.n("success_rate_min"), int(streaming.n("streaming_min_requests")))
        if invalid:
            triton_facts.withdraw(StreamingCapacity, model)
            reasons.append(invalid)
            continue
        verdict = record_stream_curve(check, model, swept, budget_ms)
        capacity, undecided = record_stream_capacity(check, model, swept, verdict, budget_ms,
                                              instance_count(triton.client.model_config(model)))
        reasons.append(undecided)
        triton_facts.publish(capacity)
    streaming.not_valid(reasons)


# -- PERF-3 -------------------------------------------------------------------------------------------
@pytest.mark.triton_check("PERF-3")
def test_streaming_soak_every_request_finishes(streaming, check):
    """For `streaming_soak_s`, streams at `streaming_concurrency`: every request gets its final
    response within `streaming_final_deadline_s` (a stuck request is named with its id and the
    tokens it got), nothing fails, and server memory (process tree RSS where the run owns the
    server, else the host's) does not grow by more than `streaming_memory_growth_max_mb`. A stream
    soak shorter than `soak_leak_min_duration_s`, or one that could not read server memory, has not
    judged that leak rule (on the span it ran, not the one planned) and is INCOMPLETE (waivable),
    naming the duration it needs, unless --triton-soak-evidence names a nightly stream soak of this
    very deployment that judged it and passed (as the unary soak's evidence, with its streams per
    model no fewer than this run's); with streaming_soak_s = 0 such evidence judges PERF-3 alone."""
    models = streaming.models()
    soak_s, settings = streaming.n("streaming_soak_s"), streaming.triton.settings
    identity = stream_soak_identity(streaming, models)
    check.evidence(IDENTITY_LABEL, json.dumps(identity, indent=1, sort_keys=True))
    if soak_s <= 0:
        if refused := stream_soak_off(check, settings, identity):
            check.incomplete(refused)
        return
    unjudged = [u for u in (record_stream_soak(check, soak(streaming, model, soak_s), soak_s) for model in models) if u]
    if unjudged and not check.errors:
        if still := stream_evidence_stands_in(check, settings, identity, unjudged):
            check.incomplete("; ".join(still))


# -- PERF-4 -------------------------------------------------------------------------------------------
@pytest.mark.triton_check("PERF-4")
def test_streaming_cancellation_leaves_instances_serving(streaming, triton, check):
    """Streams cancelled by their clients mid-generation (gRPC cancellation) leave every instance
    serving: within `streaming_cancel_recovery_max_s`, 2 x instances concurrent requests all end
    with a final response, and the server stays ready."""
    models = streaming.models()
    recovery_max = check.threshold("streaming_cancel_recovery_max_s")
    for model in models:
        plan = streaming.plan(model)
        senders = 2 * instance_count(triton.client.model_config(model))
        load = streaming.load(plan, concurrency=senders, max_tokens=int(streaming.n("streaming_max_tokens")) * 8).start()
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
            last = streaming.load(plan, concurrency=senders, duration_s=1.0, max_tokens=4).run().stats
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


@pytest.mark.triton_check("PERF-4")
def test_streaming_sigterm_ends_streams_cleanly(streaming, triton, faults, check):
    """SIGTERM to a server this run owns, with streams in flight (open loop): every request in
    flight at the signal ends with its final response (at most `shutdown_lost_requests_max` cut
    off without one), none hangs, and the server exits by itself with code 0 within its exit
    timeout. The server's log says whether it counted those streams as in-flight inferences when
    it began to drain; when it did not, it unloaded the model under live streams, which is named
    (a warning when nothing was lost this time). Nothing in flight at the signal: INCOMPLETE (the
    drain was not exercised). The server is started again afterwards."""
    model = streaming.models()[0]
    outcome = run_streaming_fault(faults, check, StreamingSigterm, model)
    version = initial_state_of(triton).server_version  # read before the signal: the server may not be back
    judge_streaming_sigterm(check, outcome, version)


@pytest.mark.triton_check("PERF-4")
def test_streaming_dead_stub_is_reported_and_recovers(streaming, triton, faults, check):
    """With streams running, SIGKILL one python backend stub of the decoupled model: the streams it
    served end (an error, never a hang past `streaming_final_deadline_s`), the ready endpoints stop
    answering 200 (model readiness shows a dead stub from Triton 2.64, strict server readiness from
    2.68; the finding says which this server is), and unload + load brings streaming back within
    `instance_recovery_max_s`. A kill that did not take (no stream failed or hung): INCOMPLETE."""
    model = streaming.models()[0]
    if faults.owns_process and not faults.stubs(model):
        check.not_applicable(f"{model} runs no python backend stub this run can see")
    version = triton.client.server_metadata().get("version", "?")
    outcome = run_streaming_fault(faults, check, StreamingDeadStub, model,
                            recovery_max_s=streaming.n("instance_recovery_max_s"))
    judge_streaming_dead_stub(check, outcome, version)
