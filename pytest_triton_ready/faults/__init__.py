"""Fault injection and recovery experiments (PERF-4, OPS-1's hot update); see docs/faults.md.

`FaultInjector` (the `faults` fixture) breaks the server on purpose under open-loop traffic from
the load engine: a python backend stub killed, the server SIGKILLed and restarted, a forced
reload, a new version rolled out, SIGTERM under load. Each experiment returns an Outcome with its
timeline (100 ms bins and named events) and the numbers its check compares with thresholds.
"""

from .injector import FaultInjector
from .outcomes import InstanceRestartOutcome, Outcome, ReloadOutcome, ServerRestartOutcome, ShutdownOutcome
from .probes import InstanceProbe, InstanceProber, Watcher, wait_until
from .processes import StubProcess, local_stubs, still_running
from .reload_experiments import RELOAD_MARKER, with_reload_marker
from .schema import FaultPlan

__all__ = ["FaultInjector", "FaultPlan", "InstanceProbe", "InstanceProber", "InstanceRestartOutcome", "Outcome",
           "RELOAD_MARKER", "ReloadOutcome", "ServerRestartOutcome", "ShutdownOutcome", "StubProcess", "Watcher",
           "local_stubs", "still_running", "wait_until", "with_reload_marker"]
