"""The load generator's own health, and the one place a rule hears of it.

Every window records, for the load generator itself: late sends (open-loop requests sent, or
dropped, more than LATE_SEND_S behind their schedule), the event loop's lag (how late a 10 ms
timer fires: max and p99 per window) and the process CPU time (per window and per request).

Rule: a latency rule is not judged on windows in which the client fell behind (loop lag above
`client_lag_max_ms`, or late sends above `client_late_send_max` of the window's scheduled
requests). Where it would fail or stay undecided, it ends with the outcome "the load generator
fell behind (88 late sends in window 18, loop lag 40 ms): run the client on its own cores or
lower the rate", which makes the check INCOMPLETE, never a FAIL blamed on the server. A pass
stands on loop lag alone (a loop that reads answers late only adds to the latency measured), not
on late sends: latency counts from the send (load/traffic.py), and a server sent that many
requests late was not given the load planned, so a pass there is the same INCOMPLETE. A
throughput measured while the
client was saturated (CPU of at least `client_cpu_saturation` cores per load process, or a loop
lag beyond the threshold) is a lower bound, "limited by the load generator".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from .decision import FAIL, PASS, UNDECIDED, Judgement

if TYPE_CHECKING:
    from ..record.recorder import CheckRecorder

BEHIND = "the load generator fell behind"
ADVICE = "run the client on its own cores or lower the rate"
LATENCY_UNITS = ("ms", "s", "us")


@dataclass(frozen=True)
class ClientLimits:
    lag_max_ms: float = 50.0
    late_send_max: float = 0.05  # share of a window's scheduled requests
    cpu_saturation: float = 0.9  # cores per load process

    @classmethod
    def from_settings(cls, settings: Any) -> ClientLimits:
        return cls.from_lookup(lambda name: settings.threshold(name))

    @classmethod
    def from_lookup(cls, lookup: Any) -> ClientLimits:
        """The limits from `lookup(name)` -> ThresholdValue; a name it does not know keeps its default."""
        values = {}
        for field_name, threshold in (("lag_max_ms", "client_lag_max_ms"), ("late_send_max", "client_late_send_max"),
                                      ("cpu_saturation", "client_cpu_saturation")):
            try:
                values[field_name] = float(lookup(threshold).value)
            except (KeyError, AttributeError, TypeError):
                pass
        return cls(**values)


def _health(window: Any) -> tuple[int, float | None, int]:
    """(late sends, loop lag max in ms, requests scheduled) of a load Window or a soak Window."""
    stats = getattr(window, "stats", None)
    if stats is not None:
        return stats.late_sends, stats.loop_lag_max_ms, stats.attempted
    return (getattr(window, "late_sends", 0) or 0, getattr(window, "loop_lag_max_ms", None),
            window.sent + window.dropped)


def window_behind(window: Any, limits: ClientLimits) -> str | None:
    """'88 late sends in window 18, loop lag 40 ms' where the client fell behind in `window`, else None."""
    late, lag, scheduled = _health(window)
    late_share = late / scheduled if scheduled else 0.0
    if (lag is None or lag <= limits.lag_max_ms) and late_share <= limits.late_send_max:
        return None
    lag_text = f", loop lag {lag:.0f} ms" if lag is not None else ""
    return f"{late} late sends in window {window.index}{lag_text}"


def fell_behind(windows: Sequence[Any], limits: ClientLimits) -> str | None:
    """The sentence for the worst window in which the client fell behind, else None."""
    behind = [(w, window_behind(w, limits)) for w in windows]
    behind = [(w, text) for w, text in behind if text]
    if not behind:
        return None
    worst, text = max(behind, key=lambda b: (_health(b[0])[0], _health(b[0])[1] or 0.0))
    more = f"; {len(behind) - 1} more windows" if len(behind) > 1 else ""
    return f"{BEHIND} ({text}{more}): {ADVICE}"


def sent_late(windows: Sequence[Any], limits: ClientLimits) -> bool:
    """Whether late sends exceeded `late_send_max` of the scheduled requests in any window."""
    for window in windows:
        late, _, scheduled = _health(window)
        if scheduled and late / scheduled > limits.late_send_max:
            return True
    return False


def is_behind(outcome: str) -> bool:
    """Whether a judgement's outcome is 'the load generator fell behind (...)'."""
    return outcome.startswith(BEHIND)


def guard(judgements: Sequence[Judgement], windows: Sequence[Any], limits: ClientLimits) -> list[Judgement]:
    """The judgements, each latency rule that failed or stayed undecided on windows where the
    client fell behind given that reason as its outcome instead; a passed one too where the
    client sent late (the server was not given the load planned)."""
    reason = fell_behind(windows, limits)
    if reason is None:
        return list(judgements)
    outcomes = (FAIL, UNDECIDED, PASS) if sent_late(windows, limits) else (FAIL, UNDECIDED)
    return [replace(j, outcome=reason) if j.rule.unit in LATENCY_UNITS and j.outcome in outcomes else j
            for j in judgements]


def guard_soak(evaluation: Any, windows: Sequence[Any], limits: Any) -> Any:
    """A soak's Evaluation (soak/judge.py), its failed latency rule (p99 drift) not a failure where
    the client fell behind in a window, nor a pass where it sent late (guard's rule): recorded for
    information, and the reason among the rules left undecided (the soak ends INCOMPLETE).
    `limits`: the soak's {name: ThresholdValue}."""
    client_limits = ClientLimits.from_lookup(limits.__getitem__)
    reason = fell_behind(windows, client_limits)
    if reason is None:
        return evaluation
    judged = (False, True) if sent_late(windows, client_limits) else (False,)
    latency = [o for o in evaluation.outcomes if o.rule in SOAK_LATENCY_RULES and o.passed in judged]
    if not latency:
        return evaluation
    evaluation.outcomes = [replace(o, passed=None, threshold=None, finding=None) if o in latency else o
                           for o in evaluation.outcomes]
    evaluation.undecided.append(f"p99 drift: {reason}")
    return evaluation


SOAK_LATENCY_RULES = ("p99-drift",)


def saturated(stats: Any, workers: int, limits: ClientLimits) -> str | None:
    """'limited by the load generator (...)' where the client was saturated over `stats`, else None."""
    cores = stats.client_cores
    lag = stats.loop_lag_max_ms
    if cores is not None and cores >= limits.cpu_saturation * max(1, workers):
        return (f"limited by the load generator ({cores:.2f} cores of CPU for {max(1, workers)} load process(es)): "
                f"a lower bound; {ADVICE}")
    if lag is not None and lag > limits.lag_max_ms:
        return f"limited by the load generator (loop lag {lag:.0f} ms): a lower bound; {ADVICE}"
    return None


def record_client_health(check: CheckRecorder, measurement: Any, model: str | None = None) -> None:
    """The load generator's health over a measurement's reported windows, as measurements with
    units on `check` (evidence: nothing is compared here), and where it was saturated, say so."""
    stats = measurement.stats
    check.measure("client late sends", stats.late_sends, "requests", model=model)
    if stats.loop_lag_max_ms is not None:
        check.measure("client event-loop lag max", round(stats.loop_lag_max_ms, 3), "ms", model=model)
        check.measure("client event-loop lag p99", round(stats.loop_lag_p99_ms, 3), "ms", model=model)
    if stats.client_cores is not None:
        check.measure("client CPU", round(stats.client_cores, 3), "cores", model=model)
    limited = measurement.client_limited
    if limited:
        check.finding(f"{model + ': ' if model else ''}throughput {stats.throughput_infer_s:.0f} infer/s {limited}",
                      severity="warning", model=model)
