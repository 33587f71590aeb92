"""Python's collector kept off a measurement's path.

A full (generation 2) collection scans every object the process holds: in the load generator's
process, the server client, the protobuf modules and, under pytest, the whole test session. It
stops the traffic's event loop meanwhile: 46 ms for 82,000 objects on the 2-core development
machine, long enough to show as the server's p99. While traffic runs, the objects that existed
when it started are frozen (gc.freeze: left out of every scan), so a collection scans only what
the traffic itself made; when the last traffic of the process ends they are unfrozen, and
collected as ever from then on.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_lock = threading.Lock()
_running = 0
_ours = False  # whether the freeze in force is this module's (a process that froze its own is left as it is)


@contextmanager
def frozen_heap() -> Iterator[None]:
    """Freeze the objects that exist now while the block runs (nested and concurrent blocks share
    one freeze, undone by the last to end). A process that froze objects itself keeps its freeze."""
    global _running, _ours
    with _lock:
        if _running == 0 and gc.get_freeze_count() == 0:
            gc.freeze()
            _ours = True
        _running += 1
    try:
        yield
    finally:
        with _lock:
            _running -= 1
            if _running == 0 and _ours:
                gc.unfreeze()
                _ours = False


__all__ = ["frozen_heap"]
