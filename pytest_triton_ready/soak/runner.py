"""The soak loop: open-loop traffic from the load engine for the whole duration, one window at a
time; each window is sampled (server, GPU, runner), journaled durably, and shown on the terminal.

Ctrl-C (SIGINT) and SIGTERM end the soak cleanly: the traffic stops, the windows closed so far stay
in the journal, whose last line says `interrupted`, and the caller still records and reports them.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..errors import TritonReadyError
from .journal import JournalWriter
from .sampler import Reading, Sampler
from .schedule import SoakPlan
from .status_line import ProgressLine, progress_text
from .windows import ModelShare, SoakWindow, top_reasons

TICK_S = 1.0  # how often the progress line moves between windows (TTY only)
STALL_GRACE_S = 30.0


class SoakInterrupted(TritonReadyError):
    """SIGTERM during a soak: handled like Ctrl-C."""


@dataclass
class SoakOutcome:
    windows: list[SoakWindow]
    ran_s: float
    end_reason: str  # completed | interrupted | error
    error: str | None = None
    overall: Any = None  # the load engine's Stats over the whole soak, when the traffic ended normally
    notes: list[str] = field(default_factory=list)


def window_from(engine_window: Any, reading: Reading, wall_time: float, new_notes: list[str]) -> SoakWindow:
    """A soak Window from one load-engine window and the readings taken as it closed."""
    stats = engine_window.stats
    failed = stats.count_errors
    return SoakWindow(
        index=engine_window.index, start_s=round(engine_window.start_s, 3), end_s=round(engine_window.end_s, 3),
        wall_time=round(wall_time, 3), sent=stats.count_ok + failed, ok=stats.count_ok, failed=failed,
        dropped=stats.dropped, errors=top_reasons(stats.errors), p50_ms=_round(stats.p50_ms),
        p99_ms=_round(stats.p99_ms), max_ms=_round(stats.max_ms),
        models={m: ModelShare(s.count_ok, s.count_errors, _round(s.p99_ms)) for m, s in engine_window.by_model.items()},
        pending_requests=reading.pending_requests, host_memory_used_bytes=reading.host_memory_used_bytes,
        server_rss_bytes=reading.server_rss_bytes, gpu_memory_used_bytes=reading.gpu_memory_used_bytes,
        gpu_utilization=reading.gpu_utilization, runner_rss_bytes=reading.runner_rss_bytes, notes=new_notes,
        late_sends=stats.late_sends, loop_lag_max_ms=_round(stats.loop_lag_max_ms),
        loop_lag_p99_ms=_round(stats.loop_lag_p99_ms), runner_cpu_s=_round(stats.client_cpu_s),
    )


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


def run_soak(engine: Any, plan: SoakPlan, journal: JournalWriter, sampler: Sampler,
             progress: ProgressLine | None = None, protocol: str = "grpc",
             clock: Callable[[], float] = time.monotonic) -> SoakOutcome:
    """Drive `plan.rates` open loop through `engine` (a LoadEngine) for `plan.duration_s`.

    Never raises for what happens during the soak: the outcome says how it ended. The journal is
    closed with an `end` line in every case but a killed process.
    """
    expected = max(1, int(plan.duration_s // plan.window_s + 1e-9))
    windows: list[SoakWindow] = []
    errors_total = completed_total = 0
    seen_notes: set[str] = set()
    end_reason, error = "completed", None
    traffic = engine.open_loop(dict(plan.rates), protocol=protocol, window_s=plan.window_s, bin_s=None,
                               duration_s=plan.duration_s + plan.window_s)
    started = clock()

    def take(engine_window: Any) -> None:
        nonlocal errors_total, completed_total
        reading = sampler.read()
        new_notes = [n for n in reading.notes if n not in seen_notes]
        seen_notes.update(new_notes)
        window = window_from(engine_window, reading, time.time(), new_notes)
        journal.window(window)
        windows.append(window)
        errors_total += window.failed
        completed_total += window.completed
        if progress is not None:
            progress.show(progress_text(window.end_s, plan.duration_s, window, errors_total, completed_total))

    with _sigterm_interrupts():
        try:
            traffic.start()
            last_window_at = clock()
            while len(windows) < expected:
                engine_window = next(iter(traffic.windows(timeout_s=TICK_S)), None)
                if engine_window is not None:
                    take(engine_window)
                    last_window_at = clock()
                    continue
                if not traffic.running:
                    traffic.stop()  # surfaces the load thread's error, if it had one
                    raise RuntimeError(f"the load engine stopped after {len(windows)} of {expected} windows")
                if clock() - last_window_at > plan.window_s + STALL_GRACE_S:
                    raise RuntimeError(f"no soak window closed for {clock() - last_window_at:.0f} s")
                if progress is not None and progress.tty:
                    last = windows[-1] if windows else None
                    progress.show(progress_text(clock() - started, plan.duration_s, last, errors_total, completed_total))
        except (KeyboardInterrupt, SoakInterrupted):
            end_reason = "interrupted"
        except Exception as exc:  # the soak's own failure is reported, never a traceback in hour 20
            end_reason, error = "error", f"{type(exc).__name__}: {exc}"
        overall = None
        try:
            result = traffic.stop()
            overall = result.stats if result is not None else None
            for engine_window in traffic.windows(timeout_s=0):
                if len(windows) < expected:
                    take(engine_window)
        except (KeyboardInterrupt, SoakInterrupted):
            end_reason = "interrupted"
        except Exception as exc:
            if error is None and end_reason == "completed":
                end_reason, error = "error", f"{type(exc).__name__}: {exc}"
    ran_s = windows[-1].end_s if windows else 0.0
    if progress is not None:
        progress.close()
    return SoakOutcome(windows, ran_s, end_reason, error, overall)


class _sigterm_interrupts:
    """Within the block, SIGTERM ends the soak like Ctrl-C (main thread only; elsewhere a no-op)."""

    def __enter__(self) -> None:
        self._previous = None
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGTERM, self._raise)

    def __exit__(self, *exc: Any) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGTERM, self._previous)

    @staticmethod
    def _raise(signum: int, frame: Any) -> None:
        raise SoakInterrupted("SIGTERM")
