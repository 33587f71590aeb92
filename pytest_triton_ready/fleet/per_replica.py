"""Each replica on its own, reached directly (bypassing the balancer): live, ready, every model
READY on the balancer READY on it and answering (CFG-1); its metrics reachable and moving (MON-1)."""

from __future__ import annotations

from ..record.recorder import CheckRecorder
from ..server.metrics import CORE_FAMILIES, MetricsError, scrape
from .under_test import FleetUnderTest


def record_serving(check: CheckRecorder, fleet: FleetUnderTest, models: list[str]) -> None:
    """CFG-1 per replica: /v2/health/live and /v2/health/ready answer 200, each of `models` (READY
    on the balancer) is READY on it and answers a real inference."""
    for replica in fleet.replicas:
        client = fleet.clients[replica.name]
        try:
            live = client.get_status("/v2/health/live")
            ready = client.get_status("/v2/health/ready")
        except Exception as exc:
            check.finding(f"replica {replica.name}: unreachable at {replica.http_url}: {exc}", model=replica.name)
            continue
        check.measure("live (HTTP 200)", live, "status", model=replica.name, threshold=200, comparison="==",
                      finding=f"replica {replica.name}: /v2/health/live answers {live}")
        check.measure("ready (HTTP 200)", ready, "status", model=replica.name, threshold=200, comparison="==",
                      finding=f"replica {replica.name}: /v2/health/ready answers {ready}")
        index = {e["name"]: e.get("state") for e in client.repository_index() if e.get("state") == "READY"}
        for model in models:
            if model not in index:
                check.finding(f"replica {replica.name}: model {model} is not READY (it is on the balancer)",
                              model=f"{replica.name}/{model}")
                continue
            outcome = client.infer(model)
            check.measure("inference latency", round(outcome.latency_s * 1000, 3), "ms", model=f"{replica.name}/{model}")
            if not outcome.ok:
                check.finding(f"replica {replica.name}: {model} inference failed: {outcome.error}",
                              model=f"{replica.name}/{model}")
    if check.errors:
        check.recommend("Take the replicas named above out of the balancer's rotation until they pass CFG-1 on "
                        "their own; a balancer that health-checks /v2/health/ready would have done so.")


def record_metrics(check: CheckRecorder, fleet: FleetUnderTest, models: list[str], timeout_s: float) -> None:
    """MON-1 per replica: its metrics endpoint answers with the core nv_inference_* families, and
    nv_inference_request_success of `models[0]` rises after one inference sent to it directly."""
    headers = fleet.settings.headers
    for replica in fleet.replicas:
        try:
            before = scrape(replica.metrics_url, headers, timeout_s)
        except MetricsError as exc:
            check.finding(f"replica {replica.name}: metrics endpoint {replica.metrics_url}: {exc}", model=replica.name)
            continue
        missing = before.missing(CORE_FAMILIES)
        check.measure("core nv_inference_* families missing", len(missing), "families", model=replica.name,
                      threshold=0, finding=f"replica {replica.name}: metric families missing: {', '.join(missing)}")
        if not models:
            continue
        outcome = fleet.clients[replica.name].infer(models[0])
        if not outcome.ok:
            check.finding(f"replica {replica.name}: the inference meant to move its counters failed: {outcome.error}",
                          model=replica.name)
            continue
        after = scrape(replica.metrics_url, headers, timeout_s)
        rise = after.delta(before, "nv_inference_request_success", model=models[0])
        check.measure("nv_inference_request_success rise after 1 inference", rise, "requests",
                      model=f"{replica.name}/{models[0]}", threshold=1, comparison=">=",
                      finding=f"replica {replica.name}: nv_inference_request_success did not rise after an inference")
