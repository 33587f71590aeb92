"""The load engine: closed- and open-loop traffic against Triton with streaming statistics.

Public surface (see docs/load-engine.md):
- `LoadEngine` (`open_loop`, `closed_loop`, `run`, `measure`), `BackgroundTraffic` (what
  `open_loop`/`closed_loop` return: a context manager with `event`, `windows`, `stop`, `result`),
- `TrafficResult` (`stats`, `by_model`, `timeline`, `windows`), `Stats`, `Window`, `Timeline`, `Bin`,
- `Measurement` and `MeasureRules` (stability and validity),
- `TrafficRunner` / `TrafficView` (load/runner.py): the Protocol BackgroundTraffic and the streaming
  engine's StreamingLoad share (start, stop, wait, running, event, in_flight, elapsed_s),
- `PlanRunner` (load/plan_runners.py): where a measurement runs, `LocalRunner`, `ProcessRunner` or
  `ClusterRunner` (Ray), picked by `LoadEngine.runner_for`.
"""

from .background import BackgroundTraffic
from .engine import LoadEngine, Measurement
from .plan_runners import ClusterRunner, LocalRunner, PlanRunner, ProcessRunner
from .runner import TrafficRunner, TrafficView
from .stability import MeasureRules
from .stats import LatencyHistogram, Stats, Tally
from .timeline import Bin, Event, Timeline
from .traffic import TrafficResult, Window

__all__ = ["BackgroundTraffic", "Bin", "ClusterRunner", "Event", "LatencyHistogram", "LoadEngine", "LocalRunner",
           "MeasureRules", "Measurement", "PlanRunner", "ProcessRunner", "Stats", "Tally", "Timeline", "TrafficResult",
           "TrafficRunner", "TrafficView", "Window"]
