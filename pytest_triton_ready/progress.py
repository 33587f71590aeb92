"""Progress of a long check on the terminal: what it is doing, while it does it.

The plugin wraps every check in a CheckProgress: a check that is still running after QUIET_S
(`--triton-progress-after`) gets a line (`  PERF-2 ... 12 s: scale: concurrency 4 (point 3, search
bound 512)`), and another each time the check reports a different step. While the step stays the
same, a heartbeat after HEARTBEAT_S of silence says what it waits for and for how long (`  PERF-2
... 32 s: waiting for scale: concurrency 4 (point 3, search bound 512) to finish (20 s so far)`),
then after twice that silence, up to HEARTBEAT_MAX_S. Checks (and the load engine, fault
experiments) report through the module-level API, which does nothing outside a check:

    from pytest_triton_ready import progress
    progress.step(f"{model}: concurrency {c} (point {i}, search bound {bound})")   # shown at once
    with progress.phase("server restart (scale): fault injected"):
        ...
    progress.status(f"{model}: stream soak {t:.0f} of {total:.0f} s")   # shown with the next heartbeat
    progress.waiting("the server to be ready again")   # what the heartbeat says the step waits for
    progress.own_line()   # the check draws its own progress line from here on (the soak)

Lines are written through pytest's terminal reporter with output capture suspended, under one
lock; the heartbeat thread is joined before pytest reads the check's captured output.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator

QUIET_S = 3.0
HEARTBEAT_S = 10.0
HEARTBEAT_MAX_S = 60.0
MIN_GAP_S = 1.0

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
        self._interval = heartbeat_s  # silence before the next heartbeat; doubles while the step stays
        self._started = clock()
        self._last_shown = -1e9
        self._step = ""
        self._step_since = self._started
        self._shown_step: str | None = None
        self._waiting = ""
        self._unshown = False  # a step came too soon after the last line: shown once MIN_GAP_S passed
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.lines: list[str] = []

    def elapsed(self) -> float:
        return self._clock() - self._started

    def step(self, text: str) -> None:
        """The check moved on; shown at once when the check has run longer than QUIET_S and the
        last line is at least MIN_GAP_S old, else by the heartbeat once it is (unless a later step
        replaced it: steps quicker than MIN_GAP_S coalesce). The same step again is no news."""
        if text == self._step:
            return
        self._set(text)
        self._unshown = True
        if self.elapsed() >= self._quiet_s and self._clock() - self._last_shown >= MIN_GAP_S:
            self._show()

    def status(self, text: str) -> None:
        """What the check is doing, shown with the next heartbeat line (for progress that moves
        continuously, e.g. a soak's seconds, where a line per update would flood the terminal)."""
        if text != self._step:
            self._set(text)

    def waiting(self, text: str) -> None:
        """What the current step waits for (a server to come back, a measurement to settle): the
        heartbeat says so while the step does not change."""
        self._waiting = text

    def _set(self, text: str) -> None:
        self._step = text
        self._step_since = self._clock()
        self._waiting = ""

    def _show(self, heartbeat: bool = False) -> None:
        with _lock:
            if self._stop.is_set():
                return
            head = f"  {self.label} ... {self.elapsed():.0f} s"
            if heartbeat:
                what = self._waiting or (f"{self._step} to finish" if self._step else "the check to finish")
                text = f"{head}: waiting for {what} ({self._clock() - self._step_since:.0f} s so far{_share_left()})"
                self._interval = min(self._interval * 2, HEARTBEAT_MAX_S)
            else:
                text = head + (f": {self._step}" if self._step else "")
                self._shown_step = self._step
                self._interval = self._heartbeat_s
            self._unshown = False
            self._last_shown = self._clock()
            self.lines.append(text)
            self._write(text)

    def start(self) -> CheckProgress:
        def beat() -> None:
            if self._stop.wait(self._quiet_s):
                return
            while True:
                since = self._clock() - self._last_shown
                if not self.lines or (self._unshown and since >= MIN_GAP_S):
                    self._show()
                elif since >= self._interval - 0.05:
                    self._show(heartbeat=self._step == self._shown_step)
                if self._stop.wait(min(self._heartbeat_s, 0.25)):
                    return

        self._thread = threading.Thread(target=beat, name=f"progress {self.label}", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """No more lines: the check ended, or draws its own progress line (`own_line`)."""
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)


def _share_left() -> str:
    """'; 1:10 of PERF-2's budget share left' while a run budget bounds the running check."""
    from . import budget

    deadline = budget.current()
    left = deadline.time_left()
    if left is None:
        return ""
    from .duration import format_duration

    return f"; {format_duration(max(left, 0))} of {deadline.check_id}'s budget share left"


def step(text: str) -> None:
    """Report what the running check is doing now (no-op outside a check)."""
    current = _current
    if current is not None:
        current.step(text)


def status(text: str) -> None:
    """Update what the running check is doing without a line of its own (no-op outside a check):
    the next heartbeat shows it."""
    current = _current
    if current is not None:
        current.status(text)


@contextlib.contextmanager
def phase(text: str) -> Iterator[None]:
    """A named phase of a check (e.g. one fault experiment's fault or recovery)."""
    step(text)
    yield


def waiting(text: str) -> None:
    """Say what the running check's current step waits for (no-op outside a check): the heartbeat
    shows it while the step does not change."""
    current = _current
    if current is not None:
        current.waiting(text)


def own_line() -> None:
    """The running check shows its progress on a line of its own from here on (the soak's
    ProgressLine): its heartbeat lines stop, so that the two do not interleave."""
    current = _current
    if current is not None:
        current.stop()


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
