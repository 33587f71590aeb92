"""Soak mode (PERF-3): open-loop traffic for a long time, judged window by window.

Public surface (docs/soak.md):
- `build_plan(settings, models, facts)` -> SoakPlan; `run_soak(...)` -> SoakOutcome;
- `record_soak(check, plan, windows, ran_s)`: the rules' outcomes onto a check;
- `result_from_journal(journal)`: PERF-3 judged again from a journal (INCOMPLETE when the journal
  was not closed; report/soak_journal.py's `journal_to_run` renders it); `is_journal(path)` tells
  a journal from a readiness.json;
- `parse_duration("24h")`.
"""

from ..duration import format_duration, parse_duration
from .journal import Journal, JournalError, JournalWriter, is_journal, read_journal
from .judge import RuleOutcome, SoakEvaluation, evaluate
from .record import journal_header, record_soak, result_from_journal
from .schedule import PlanError, SoakPlan, build_plan, soak_limits
from .windows import SoakWindow

__all__ = ["SoakEvaluation", "Journal", "JournalError", "JournalWriter", "RuleOutcome", "PlanError", "SoakPlan", "SoakWindow",
           "build_plan", "evaluate", "format_duration", "is_journal", "journal_header",
           "parse_duration", "read_journal", "record_soak", "result_from_journal", "soak_limits"]
