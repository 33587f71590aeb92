"""Phase "performance", PERF-3: stability under steady load for the soak duration.

`--triton-soak=DURATION` sets how long (60 s by default, 24h for a nightly job). Traffic is open
loop at a fixed rate per model; every window is journaled to soak-journal.jsonl as it closes, so a
runner that dies still leaves evidence (`triton-ready report JOURNAL` renders it).
"""

import json

import pytest

from pytest_triton_ready.health import LoadHealth
from pytest_triton_ready.run import now_iso
from pytest_triton_ready.server.models import defer_to_streaming, ready_models
from pytest_triton_ready.soak import JournalError, PlanError, build_plan, journal_header
from pytest_triton_ready.soak.conclusion import conclude, skipped_reason
from pytest_triton_ready.soak.evidence import IDENTITY_LABEL, judge_on_evidence
from pytest_triton_ready.soak.identity import identity_of
from pytest_triton_ready.soak.memory import publish_memory
from pytest_triton_ready.soak.session import gpu_instance_models, soak_target
from pytest_triton_ready.soak.status_line import ProgressLine

pytestmark = pytest.mark.usefixtures("triton")


@pytest.mark.triton_check("PERF-3")
def test_soak_stability(triton, triton_settings, triton_facts, triton_run, load, gpu, check, request):
    """The server stays stable under steady load for the whole soak: no failures, drift, leaks or queue growth.

    Open-loop traffic at a fixed rate per model, judged per window: at least success_rate_min of
    requests succeed overall and in every window; p99 of the last quarter stays within
    soak_p99_drift_ratio_max of the first (or soak_p99_drift_min_ms), by a rank test; the
    least-squares slope of server and GPU memory stays below its MB/hour limit and pending requests
    do not grow, each decided on its interval at load_confidence (too close to call otherwise:
    INCOMPLETE, with the soak that would decide it). A soak shorter than soak_leak_min_duration_s
    after warm-up, or one that could not read the server's memory at all, has not judged the leak
    rule and is INCOMPLETE (waivable), not a pass, unless --triton-soak-evidence names a nightly
    soak of this very deployment (same version, every model's READY versions, configs and files,
    launch arguments and image, at no less than this run's planned rate) that judged it and passed,
    finished in the past and no older than soak_evidence_max_age_h. With --triton-soak=0 such
    evidence judges PERF-3 alone (this run's latency drift not claimed). Where every READY model in
    scope is decoupled, NOT APPLICABLE: test_streaming_soak_every_request_finishes soaks their streams."""
    models = ready_models(triton)
    defer_to_streaming(check, triton, models)
    if skipped := skipped_reason(triton_settings.triton_soak, models, triton_settings.triton_soak_evidence):
        check.incomplete(skipped)
    try:
        plan = build_plan(triton_settings, models, triton_facts)
    except PlanError as exc:
        pytest.fail(f"triton-ready: {exc}", pytrace=False)
    identity = identity_of(triton, triton_settings, plan.rates)
    check.evidence(IDENTITY_LABEL, json.dumps(identity, indent=1, sort_keys=True))
    if not plan.duration_s:  # turned off: the evidence judges PERF-3, or it stays INCOMPLETE
        if refused := judge_on_evidence(check, triton_settings.triton_soak_evidence, identity, plan.limits):
            check.incomplete(refused)
        return
    header = journal_header(check.result, plan, triton_run.context or triton_run.collect_context(), triton_settings,
                            now_iso()) | {"server_identity": identity}
    health = LoadHealth(triton, check, triton_facts, models)
    try:
        outcome = soak_target(triton, plan, header, gpu, ProgressLine.for_config(request.config), engine=load)
        health.observe_windows(outcome.windows)
    except JournalError as exc:
        pytest.fail(f"triton-ready: {exc}", pytrace=False)
    finally:
        health.finish()
    if outcome.end_reason == "interrupted":
        request.session.shouldstop = "the soak was interrupted"
    publish_memory(triton_facts, outcome.windows, plan.warmup_s, plan.limits)
    conclude(check, plan, outcome, identity, triton_settings.triton_soak_evidence, gpu.unavailable_reason,
             lambda: gpu_instance_models(triton.client, models))
