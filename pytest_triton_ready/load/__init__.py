"""The load engine: closed- and open-loop traffic against Triton with streaming statistics.

Public surface (see docs/load-engine.md):
- `LoadEngine` (`open_loop`, `closed_loop`, `run`, `measure`), `BackgroundTraffic` (what
  `open_loop`/`closed_loop` return: a context manager with `event`, `windows`, `stop`, `result`),
- `TrafficResult` (`stats`, `by_model`, `timeline`, `windows`), `Stats`, `Window`, `Timeline`, `Bin`,
- `Measurement` and `MeasureRules` (stability and validity),
- `TrafficRunner` / `TrafficView` (load/runner.py): the Protocol BackgroundTraffic and the streaming
  engine's StreamingLoad share (start, stop, wait, running, event, in_flight, elapsed_s).
"""

from .background import BackgroundTraffic
from .engine import LoadEngine, Measurement
from .runner import TrafficRunner, TrafficView
from .stability import MeasureRules
from .stats import LatencyHistogram, Stats, Tally
from .timeline import Bin, Event, Timeline
from .traffic import TrafficResult, Window

__all__ = ["BackgroundTraffic", "Bin", "Event", "LatencyHistogram", "LoadEngine", "MeasureRules", "Measurement",
           "Stats", "Tally", "Timeline", "TrafficResult", "TrafficRunner", "TrafficView", "Window"]
