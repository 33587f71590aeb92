"""Reading an experiment's timeline (the load engine's 100 ms bins and named events): was the
steady state steady, how many requests failed after the fault, when did service recover, how
high did latency go, and the series a report draws.

A bin (`load.timeline.Bin`) holds the requests that *completed* in it (`ok`, `errors`), the
requests the client could not send on time (`dropped`), and the bin's p50/p99 latency in ms.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

# What a client may safely retry elsewhere: the server never took the request.
_REFUSED = ("connection refused", "failed to connect", "connect failed", "no available versions",
            "not ready", "clientconnectorerror", "cannot connect to host", "server is stopping",
            "stopped accepting new inference requests")


@dataclass(frozen=True)
class SteadyState:
    """The traffic before the fault: what it proved about the service."""

    ok: int
    errors: int
    dropped: int
    success_rate: float | None
    p99_ms: float | None  # the median of the bins' p99: a baseline one slow bin cannot move
    holds: bool
    reason: str


def _in(bins: Iterable[Any], start_s: float, end_s: float | None = None) -> list[Any]:
    """The bins that start in [start_s, end_s)."""
    return [b for b in bins if b.t_s >= start_s - 1e-9 and (end_s is None or b.t_s < end_s - 1e-9)]


def steady_state(bins: Sequence[Any], start_s: float, fault_s: float, success_rate_min: float,
                 min_requests: int = 10) -> SteadyState:
    """The bins from `start_s` up to the one the fault happened in (excluded): the hypothesis holds
    when enough requests answered, the success rate meets `success_rate_min` and the client kept
    its rate (no drops)."""
    end_s = bin_start(bins, fault_s)
    window = _in(bins, start_s, end_s)
    ok = sum(b.ok for b in window)
    errors = sum(b.errors for b in window)
    dropped = sum(b.dropped for b in window)
    answered = ok + errors
    rate = ok / answered if answered else None
    p99s = [b.p99_ms for b in window if b.p99_ms is not None]
    p99 = statistics.median(p99s) if p99s else None
    if answered < min_requests:
        return SteadyState(ok, errors, dropped, rate, p99, False,
                           f"only {answered} requests answered in the {end_s - start_s:.1f} s before the fault "
                           f"(at least {min_requests} are needed)")
    if rate < success_rate_min:
        return SteadyState(ok, errors, dropped, rate, p99, False,
                           f"{errors} of {answered} requests failed before the fault (success rate {rate:.4f}, "
                           f"the steady state needs {success_rate_min})")
    if dropped:
        return SteadyState(ok, errors, dropped, rate, p99, False,
                           f"the client dropped {dropped} requests before the fault: it could not keep its rate")
    return SteadyState(ok, errors, dropped, rate, p99, True, f"{ok} requests, success rate {rate:.4f}")


def _span(bins: Sequence[Any], start_s: float, end_s: float | None) -> list[Any]:
    """The bins from the one holding `start_s` up to the one holding `end_s` (excluded): spans cut
    at the same moment partition the bins."""
    return _in(bins, bin_start(bins, start_s), None if end_s is None else bin_start(bins, end_s))


def failed_between(bins: Sequence[Any], start_s: float, end_s: float | None = None) -> int:
    """Errors from the bin holding `start_s` until the bin holding `end_s` (excluded)."""
    return sum(b.errors for b in _span(bins, start_s, end_s))


def dropped_between(bins: Sequence[Any], start_s: float, end_s: float | None = None) -> int:
    return sum(b.dropped for b in _span(bins, start_s, end_s))


def last_error_at(bins: Sequence[Any], after_s: float) -> float | None:
    """End of the last bin with an error at or after `after_s`, or None."""
    failing = [b for b in _in(bins, bin_start(bins, after_s)) if b.errors]
    return failing[-1].t_s + _width(bins) if failing else None


def first_error_at(bins: Sequence[Any], after_s: float) -> float | None:
    failing = [b for b in _in(bins, bin_start(bins, after_s)) if b.errors]
    return failing[0].t_s if failing else None


def recovered_at(bins: Sequence[Any], after_s: float, hold_s: float) -> float | None:
    """Start of the first bin at or after `after_s` from which every bin for `hold_s` has
    successes and no error: when clients see normal service again. None if that never happens."""
    candidates = _in(bins, bin_start(bins, after_s))
    need = max(1, round(hold_s / _width(bins)))
    for i, first in enumerate(candidates):
        run = candidates[i:i + need]
        if len(run) == need and all(b.ok and not b.errors for b in run):
            return first.t_s
    return None


def peak_p99_ms(bins: Sequence[Any], start_s: float, end_s: float | None = None) -> float | None:
    values = [b.p99_ms for b in _span(bins, start_s, end_s) if b.p99_ms is not None]
    return max(values) if values else None


def event_time(events: Sequence[Any], name: str) -> float | None:
    """When the first event called `name` happened (seconds since the traffic started)."""
    return next((e.t_s for e in events if e.name == name), None)


def is_refusal(reason: str) -> bool:
    """True for an error that says the server never took the request (safe to retry elsewhere)."""
    text = reason.lower()
    return any(marker in text for marker in _REFUSED)


def split_errors(errors: dict[str, int]) -> tuple[dict[str, int], dict[str, int]]:
    """(refused, lost): errors by reason, split into clean refusals and requests the server took
    and then failed or dropped without an answer."""
    refused = {r: n for r, n in errors.items() if is_refusal(r)}
    lost = {r: n for r, n in errors.items() if not is_refusal(r)}
    return refused, lost


def chart_series(bins: Sequence[Any]) -> dict[str, list[tuple[float, float]]]:
    """Per bin: successes, errors (and client drops, when any), p99 latency in ms."""
    series = {
        "successes per bin": [(round(b.t_s, 3), b.ok) for b in bins],
        "errors per bin": [(round(b.t_s, 3), b.errors) for b in bins],
        "p99 latency (ms)": [(round(b.t_s, 3), round(b.p99_ms, 3)) for b in bins if b.p99_ms is not None],
    }
    if any(b.dropped for b in bins):
        series["dropped by the client per bin"] = [(round(b.t_s, 3), b.dropped) for b in bins]
    return series


def chart_markers(events: Sequence[Any]) -> list[dict[str, Any]]:
    return [{"x": round(e.t_s, 3), "label": e.name} for e in events]


def _width(bins: Sequence[Any]) -> float:
    if len(bins) >= 2:
        return round(bins[1].t_s - bins[0].t_s, 6) or 0.1
    return 0.1


def bin_start(bins: Sequence[Any], t_s: float) -> float:
    """Start of the bin that holds time `t_s`."""
    width = _width(bins)
    return int(t_s / width + 1e-9) * width


def streams_steady(bins: Sequence[Any], tokens: int, streams: int) -> SteadyState:
    """The steady state of streamed traffic before a fault: every one of `streams` streams is
    producing (at least `streams` tokens came back), no request failed and none was dropped.
    Long generations may not have completed a single request yet, so the tokens are the proof."""
    ok = sum(b.ok for b in bins)
    errors = sum(b.errors for b in bins)
    dropped = sum(b.dropped for b in bins)
    p99s = [b.p99_ms for b in bins if b.p99_ms is not None]
    p99 = statistics.median(p99s) if p99s else None
    rate = ok / (ok + errors) if ok + errors else None
    if errors:
        return SteadyState(ok, errors, dropped, rate, p99, False, f"{errors} streamed requests failed before the fault")
    if dropped:
        return SteadyState(ok, errors, dropped, rate, p99, False,
                           f"the client dropped {dropped} requests before the fault: it could not keep its rate")
    if tokens < streams:
        return SteadyState(ok, errors, dropped, rate, p99, False,
                           f"only {tokens} tokens came back over {streams} streams before the fault (at least one per "
                           "stream is needed)")
    return SteadyState(ok, errors, dropped, rate, p99, True, f"{streams} streams producing, {tokens} tokens, no error")
