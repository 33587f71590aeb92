"""MON-1 "metrics endpoint reachable and moving": the endpoint answers Prometheus text with the
core nv_inference_* families, and nv_inference_request_success rises after successful inferences."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from ..server.metrics import CORE_FAMILIES, MetricsError, MetricsSnapshot
from .traffic import one_request_sender

if TYPE_CHECKING:
    from ..record.recorder import CheckRecorder
    from ..server.under_test import ServerUnderTest

MOVE_ATTEMPTS = 8  # behind a balancer, one request in N reaches the server whose metrics are read


def requests_until_rise(send: Callable[[], str | None], rise: Callable[[], float],
                        attempts: int = MOVE_ATTEMPTS) -> tuple[int, float, str | None]:
    """Send one request at a time until `rise()` is at least 1 or `attempts` were sent:
    (requests sent, the last rise, why a request failed; sending stops at the first failure)."""
    sent, risen = 0, 0.0
    while risen < 1 and sent < attempts:
        failure = send()
        if failure:
            return sent, risen, failure
        sent += 1
        risen = rise()
    return sent, risen, None


def judge_endpoint(check: CheckRecorder, target: ServerUnderTest, read_metrics: Callable[[], MetricsSnapshot]) -> None:
    """The endpoint parses, carries every core family, and its success counter moves with traffic
    (one request at a time, up to MOVE_ATTEMPTS: behind a balancer only some reach the server whose
    metrics are read). No READY model, or a request that fails, is INCOMPLETE."""
    try:
        before = read_metrics()
    except MetricsError as exc:
        check.finding(str(exc))
        check.recommend("Start tritonserver with --allow-metrics=true and expose the metrics port (8002).")
        return
    check.measure("scrape time", round(before.scrape_s, 4), "s", threshold=check.threshold("metrics_scrape_timeout_s"))
    missing = before.missing(CORE_FAMILIES)
    check.measure("core nv_inference_* families missing", len(missing), "families", threshold=0)
    for name in missing:
        check.finding(f"metric family {name} is not exposed", value=name)
    sender = one_request_sender(target)
    if sender is None:
        check.incomplete("no READY model to move the counters with")
    model, send = sender
    sent, rise, failure = requests_until_rise(
        send, lambda: read_metrics().delta(before, "nv_inference_request_success", model=model))
    if failure:
        check.incomplete(failure)
    check.measure("inferences sent until nv_inference_request_success rose", sent, "requests", model=model)
    check.measure("nv_inference_request_success rise", rise, "requests", model=model, threshold=1, comparison=">=",
                  finding=f"{model}: nv_inference_request_success did not rise after {sent} successful inferences")
    if rise >= 1 and sent > 1:
        check.finding(f"{model}: the counter rose only after {sent} inferences: the URL spreads requests over several "
                      "servers and the metrics endpoint shows one of them (name the replicas under fleet.replicas to "
                      "read each one's metrics)", severity="info", model=model)
