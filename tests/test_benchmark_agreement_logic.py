"""benchmarks/checklist_time.py --runs: how many runs agreed on each check's verdict (no server)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

from checklist_time import agreement  # noqa: E402


def test_each_check_counts_the_runs_that_gave_its_most_common_verdict():
    runs = [{"PERF-3 test_soak": "fail", "CFG-1 test_live": "pass"},
            {"PERF-3 test_soak": "incomplete", "CFG-1 test_live": "pass"},
            {"PERF-3 test_soak": "incomplete"}]
    assert agreement(runs) == [("CFG-1 test_live", ["pass", "pass", "absent"], 2),
                               ("PERF-3 test_soak", ["fail", "incomplete", "incomplete"], 2)]
