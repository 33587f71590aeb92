"""Phase "monitoring": the metrics a production deployment is watched through exist and move."""

import pytest

from pytest_triton_ready.metrics import CORE_FAMILIES, MetricsError


@pytest.mark.triton_check("MON-1")
def test_metrics_endpoint_reachable_and_moving(triton, triton_metrics, check):
    """The Prometheus endpoint answers, parses as Prometheus text, carries the core nv_inference_*
    families, and nv_inference_request_success rises after an inference."""
    try:
        before = triton_metrics()
    except MetricsError as exc:
        check.finding(str(exc))
        check.recommend("Start tritonserver with --allow-metrics=true and expose the metrics port (8002).")
        return
    check.measure("scrape time", round(before.scrape_s, 4), "s", threshold=check.threshold("metrics_scrape_timeout_s"))
    missing = before.missing(CORE_FAMILIES)
    check.measure("core nv_inference_* families missing", len(missing), "families", threshold=0)
    for name in missing:
        check.finding(f"metric family {name} is not exposed", value=name)
    ready = [e["name"] for e in triton.client.repository_index() if e.get("state") == "READY"]
    model = next((m for m in triton.models() if m in ready), None)
    if model is None:
        check.incomplete("no READY model to move the counters with")
    outcome = triton.client.infer(model)
    if not outcome.ok:
        check.incomplete(f"the inference meant to move the counters failed: {outcome.error}")
    after = triton_metrics()
    rise = after.delta(before, "nv_inference_request_success", model=model)
    check.measure("nv_inference_request_success rise after 1 inference", rise, "requests", model=model,
                  threshold=1, comparison=">=",
                  finding=f"{model}: nv_inference_request_success did not rise after a successful inference")
