"""The soak's server memory as a fact for later checks (the deployment's memory limit): the peak
RSS of the server's process tree over the whole soak and the slope fitted after warm-up, with the
upper end of its interval."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..facts import SoakMemory
from ..load.confidence import t_quantile
from .judge import MB
from .trend import fit
from .windows import SoakWindow


def soak_memory(windows: Sequence[SoakWindow], warmup_s: float, leak_min_s: float,
                level: float = 0.95) -> SoakMemory | None:
    """None where no window read the server's RSS (a server this runner does not own)."""
    readings = [w.server_rss_bytes for w in windows if w.server_rss_bytes is not None]
    if not readings:
        return None
    settled = [w for w in windows if w.start_s >= warmup_s - 1e-9]
    trend = fit([(w.end_s, w.server_rss_bytes) for w in settled], scale=1 / MB)
    span_s = (settled[-1].end_s - settled[0].start_s) if settled else 0.0
    high = None
    if trend is not None and trend.slope_se_per_hour is not None and trend.points >= 3:
        high = trend.slope_per_hour + t_quantile(level, trend.points - 2) * trend.slope_se_per_hour
    return SoakMemory(peak_rss_bytes=max(readings), slope_mb_h=trend.slope_per_hour if trend else None,
                      slope_high_mb_h=high, span_s=round(span_s, 1), leak_judged=span_s >= leak_min_s)


def publish_memory(facts: Any, windows: Sequence[SoakWindow], warmup_s: float, limits: dict[str, Any]) -> None:
    """Leave the soak's memory for the checks after it, where the server's RSS was read."""
    fact = soak_memory(windows, warmup_s, limits["soak_leak_min_duration_s"].value)
    if fact is not None:
        facts.publish(fact)
