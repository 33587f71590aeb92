"""--triton-tune-batching: reload a model with a few max_queue_delay_microseconds values (config
overrides, so the model files are untouched), measure each at saturation, pick the best
throughput within the latency budget, and restore the original config whatever happened."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .. import progress
from ..performance.curve import CurvePoint

if TYPE_CHECKING:
    from ..record.recorder import CheckRecorder
    from ..server.under_test import ServerUnderTest


@dataclass
class TuneOutcome:
    points: dict[int, CurvePoint] = field(default_factory=dict)
    best: int | None = None
    restored: bool = True
    restore_error: str | None = None
    skipped: str | None = None


def tune_queue_delay(target: ServerUnderTest, load: Any, prof: Any, delays: list[int], cap: int = 0) -> TuneOutcome:
    client = target.client
    outcome = TuneOutcome()
    original = copy.deepcopy(client.model_config(prof.model, fresh=True))
    concurrency = min(prof.saturation_concurrency, cap) if cap > 0 else prof.saturation_concurrency
    try:
        for number, delay in enumerate(delays, start=1):
            progress.step(f"{prof.model}: max_queue_delay {delay} us ({number} of {len(delays)}), "
                          f"concurrency {concurrency}")
            config = copy.deepcopy(original)
            config.setdefault("dynamic_batching", {})["max_queue_delay_microseconds"] = int(delay)
            try:
                client.load(prof.model, config=config)
            except Exception as exc:  # model control not explicit, or the API is restricted
                outcome.skipped = f"reload with a config override was refused: {_text(exc)}"
                return outcome
            m = load.measure(prof.model, concurrency=concurrency, server_stats=False)
            outcome.points[int(delay)] = CurvePoint.measured(concurrency, m)
    finally:
        if outcome.points:
            try:
                client.load(prof.model, config=original)
                now = client.model_config(prof.model, fresh=True).get("dynamic_batching", {})
                if int(now.get("max_queue_delay_microseconds", 0)) != prof.max_queue_delay_us:
                    outcome.restored, outcome.restore_error = False, "the reloaded config differs from the original"
            except Exception as exc:
                outcome.restored, outcome.restore_error = False, _text(exc)
    within = {d: p for d, p in outcome.points.items()
              if p.trustworthy and p.p99_ms is not None and p.p99_ms <= prof.budget_p99_ms}
    if within:
        outcome.best = max(within, key=lambda d: within[d].throughput_infer_s)
    return outcome


def _text(exc: BaseException) -> str:
    message = getattr(exc, "message", None)
    text = message() if callable(message) else str(exc)
    return (text or type(exc).__name__).strip().splitlines()[0]


def tune_batching(target: ServerUnderTest, load: Any, check: CheckRecorder, profiles: list[Any], cap: int) -> None:
    """--triton-tune-batching on a check: each model's max_queue_delay_microseconds sweep measured
    and charted, the best within the p99 budget recommended, a failed restore an error finding."""
    delays = target.settings.section_model("performance").tune_queue_delays_us
    for prof in profiles:
        outcome = tune_queue_delay(target, load, prof, delays, cap)
        if outcome.skipped:
            check.finding(f"{prof.model}: batching not tuned: {outcome.skipped}", severity="warning", model=prof.model)
            continue
        for delay, point in outcome.points.items():
            check.measure(f"throughput at max_queue_delay {delay} us", round(point.throughput_infer_s, 1), "infer/s",
                          model=prof.model)
            check.measure(f"p99 at max_queue_delay {delay} us", point.p99_ms, "ms", model=prof.model)
        check.chart(f"{prof.model}: max_queue_delay_microseconds sweep", "max_queue_delay (us)", "latency (ms)",
                    {"p99": [(d, p.p99_ms) for d, p in outcome.points.items() if p.trustworthy]})
        if not outcome.restored:
            check.finding(f"{prof.model}: the original config could not be restored: {outcome.restore_error}",
                          model=prof.model)
        if outcome.best is not None:
            check.recommend(f"{prof.model}: set max_queue_delay_microseconds to {outcome.best} (measured best "
                            f"throughput within the {prof.budget_p99_ms:g} ms p99 budget; now {prof.max_queue_delay_us}).")
