"""Progress of a long check on the terminal: what it is doing, while it does it.

The plugin wraps every check in a CheckProgress: a check that is still running after QUIET_S gets
a line (`  PERF-2 ... 12 s: scale: concurrency 4 of 8`), again every HEARTBEAT_S, and at once when
the check reports a step. Checks (and the load engine, fault experiments) report steps through the
module-level API, which does nothing outside a check:

    from pytest_triton_ready.report import progress
    progress.step(f"{model}: concurrency {c} ({i} of {n})")
    with progress.phase("server restart: fault injected"):
        ...

Lines are written through pytest's terminal reporter with output capture suspended, under one
lock; the heartbeat thread is joined before pytest reads the check's captured output.
Checks with a progress line of their own (the soak, PERF-3) are left alone: SELF_REPORTING.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator

QUIET_S = 3.0
HEARTBEAT_S = 10.0
MIN_GAP_S = 1.0
SELF_REPORTING = frozenset({"PERF-3"})

_lock = threading.Lock()
_current: CheckProgress | None = None


class CheckProgress:
    """The progress of one running check; `write(text)` puts one line on the terminal."""

    def __init__(self, label: str, write: Callable[[str], None], clock: Callable[[], float] = time.monotonic,
                 quiet_s: float = QUIET_S, heartbeat_s: float = HEARTBEAT_S) -> None:
        self.label = label
        self._write = write
        self._clock = clock
        self._quiet_s = quiet_s
        self._heartbeat_s = heartbeat_s
        self._started = clock()
        self._last_shown = -1e9
        self._step = ""
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.lines: list[str] = []

    def elapsed(self) -> float:
        return self._clock() - self._started

    def step(self, text: str) -> None:
        """The check moved on; shown at once when the check has run longer than QUIET_S."""
        self._step = text
        if self.elapsed() >= self._quiet_s and self._clock() - self._last_shown >= MIN_GAP_S:
            self._show()

    def _show(self) -> None:
        text = f"  {self.label} ... {self.elapsed():.0f} s" + (f": {self._step}" if self._step else "")
        self._last_shown = self._clock()
        self.lines.append(text)
        with _lock:
            self._write(text)

    def start(self) -> CheckProgress:
        def beat() -> None:
            if self._stop.wait(self._quiet_s):
                return
            while True:
                if self._clock() - self._last_shown >= self._heartbeat_s - 0.05 or not self.lines:
                    self._show()
                if self._stop.wait(min(self._heartbeat_s, 1.0)):
                    return

        self._thread = threading.Thread(target=beat, name=f"progress {self.label}", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)


def step(text: str) -> None:
    """Report what the running check is doing now (no-op outside a check)."""
    current = _current
    if current is not None:
        current.step(text)


@contextlib.contextmanager
def phase(text: str) -> Iterator[None]:
    """A named phase of a check (e.g. one fault experiment's fault or recovery)."""
    step(text)
    yield


@contextlib.contextmanager
def running(label: str, write: Callable[[str], None], **kwargs) -> Iterator[CheckProgress]:
    """Make `label` the running check for the duration of the block."""
    global _current
    progress = CheckProgress(label, write, **kwargs).start()
    previous, _current = _current, progress
    try:
        yield progress
    finally:
        _current = previous
        progress.stop()


def terminal_writer(config) -> Callable[[str], None] | None:
    """A `write(line)` through pytest's terminal reporter with capture suspended; None when quiet."""
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is None or getattr(config.option, "verbose", 0) < 0:
        return None
    capture = config.pluginmanager.get_plugin("capturemanager")

    def write(text: str) -> None:
        guard = capture.global_and_fixture_disabled() if capture is not None else contextlib.nullcontext()
        with guard:
            reporter.write_line(text)

    return write
