"""Which models a performance check measures, and with which budget: the READY models in scope
as load profiles (the models left out named on the check), and a note where a model's p99
budget is not its SLO's."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..load.profile import ModelProfile, profile
from ..server.models import note_left_out, ready_models, served_as

if TYPE_CHECKING:
    from ..record.recorder import CheckRecorder


def profiles_in_scope(triton: Any, check: CheckRecorder = None) -> list[ModelProfile]:
    """A load profile per READY model in scope; with `check`, the models left out and the
    versions measured are recorded on it."""
    models = ready_models(triton)
    if check is not None:
        note_left_out(check, triton)
        if models:
            check.evidence("models and versions measured", "; ".join(served_as(triton, models).values()))
    return [profile(triton.settings, m, triton.client.model_config(m), triton.client.model_config) for m in models]


def budget_note(check: CheckRecorder, prof: ModelProfile) -> None:
    """Say where 'within SLO' is judged against a budget other than a p99 SLO."""
    if prof.slo_p99_ms is None:
        check.finding(f"{prof.model}: no p99 SLO configured; 'within SLO' uses the {prof.budget_source} "
                      f"of {prof.budget_p99_ms:g} ms", severity="info", model=prof.model)
