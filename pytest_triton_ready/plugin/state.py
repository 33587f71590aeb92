"""Where the plugin keeps the run in pytest's stash, and which checklist item a test item is: shared
by the plugin's modules (plugin/__init__.py and the plugin_* modules)."""

from __future__ import annotations

import pytest

from ..record.model import phase_of
from ..record.recorder import CheckRecorder
from ..run import Run

RUN_KEY = pytest.StashKey[Run]()
RECORDER_KEY = pytest.StashKey[CheckRecorder]()
REPORT_FILES_KEY = pytest.StashKey[dict]()
REPORT_ERROR_KEY = pytest.StashKey[str]()
REPORT_KEPT_KEY = pytest.StashKey[str]()  # the report directory left as it was: the session ran no check
PLAN_ONLY_KEY = pytest.StashKey[bool]()



def check_identity(item: pytest.Item) -> tuple[str, str] | None:
    """(check id, phase) from the item's triton_check marker; None for an ordinary test."""
    marker = item.get_closest_marker("triton_check")
    if marker is None:
        return None
    check_id = marker.kwargs.get("id") or (marker.args[0] if marker.args else None)
    if not check_id:
        raise pytest.UsageError(f"{item.nodeid}: triton_check marker needs an id")
    return check_id, marker.kwargs.get("phase") or phase_of(check_id)
