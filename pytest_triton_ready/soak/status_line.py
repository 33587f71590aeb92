"""The soak's progress on the terminal: one line rewritten in place on a TTY, else one line per window.

It writes through pytest's terminal reporter with output capture suspended, so it shows while the
check runs and never lands in the captured output of the test.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable

from .. import progress
from ..duration import format_duration
from .windows import SoakWindow

MB = 1024 * 1024


def progress_text(elapsed_s: float, duration_s: float, window: SoakWindow | None, errors_total: int,
                  completed_total: int) -> str:
    """'PERF-3 soak 3:00/10:00 (7:00 left) | 48.9 req/s | p99 3.1 ms | errors 0 (0.000%) | server 412 MB ...'

    The rates, p99 and memory are the last closed window's; errors count the whole soak so far."""
    left = max(0.0, duration_s - elapsed_s)
    parts = [f"PERF-3 soak {format_duration(elapsed_s)}/{format_duration(duration_s)} ({format_duration(left)} left)"]
    if window is None:
        return parts[0] + " | first window not closed yet"
    p99 = f"{window.p99_ms:.1f} ms" if window.p99_ms is not None else "-"
    share = errors_total / completed_total if completed_total else 0.0
    parts += [
        f"{window.throughput:.1f} req/s",
        f"p99 {p99}",
        f"errors {errors_total} ({share:.3%})",
    ]
    memory = []
    if window.server_rss_bytes is not None:
        memory.append(f"server {window.server_rss_bytes / MB:.0f} MB")
    if window.host_memory_used_bytes is not None:
        memory.append(f"host {window.host_memory_used_bytes / MB:.0f} MB")
    if window.gpu_memory_used_bytes is not None:
        memory.append(f"gpu {window.gpu_memory_used_bytes / MB:.0f} MB")
    if window.runner_rss_bytes is not None:
        memory.append(f"runner {window.runner_rss_bytes / MB:.0f} MB")
    if memory:
        parts.append(" ".join(memory))
    return " | ".join(parts)


class ProgressLine:
    """Shows progress through a pytest TerminalReporter (or any `write` callable, for tests)."""

    def __init__(self, reporter=None, capture_manager=None, write: Callable[[str], None] | None = None,
                 tty: bool | None = None) -> None:
        self._reporter = reporter
        self._capture = capture_manager
        self._write = write
        self.tty = bool(getattr(reporter, "isatty", False)) if tty is None else tty
        self._shown = False

    @classmethod
    def for_config(cls, config) -> ProgressLine:
        reporter = config.pluginmanager.get_plugin("terminalreporter")
        capture = config.pluginmanager.get_plugin("capturemanager")
        return cls(reporter, capture)

    def show(self, text: str) -> None:
        """Show `text` (rewriting the line on a TTY); from the first call on, the check's generic
        progress lines (progress.py) stop, so the two never interleave."""
        if not self._shown:
            progress.own_line()
        with self._uncaptured():
            if self._write is not None:
                self._write(("\r" if self.tty else "") + text + ("" if self.tty else "\n"))
            elif self._reporter is not None:
                if self.tty:
                    if not self._shown:
                        self._reporter.write_line("")
                    self._reporter.rewrite(text, erase=True)
                else:
                    self._reporter.write_line(text)
        self._shown = True

    def close(self) -> None:
        """End the rewritten line so pytest's own output starts on a fresh one."""
        if self._shown and self.tty:
            with self._uncaptured():
                if self._write is not None:
                    self._write("\n")
                elif self._reporter is not None:
                    self._reporter.write_line("")

    def _uncaptured(self):
        if self._capture is not None:
            return self._capture.global_and_fixture_disabled()
        return contextlib.nullcontext()
