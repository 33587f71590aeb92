"""One soak against a Target: the journal, the sampler, the load engine and the progress line wired
together, and the journal closed however the soak ends."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..duration import now_iso
from .journal import JournalWriter
from .runner import SoakOutcome, run_soak
from .sampler import Sampler
from .schedule import SoakPlan
from .status_line import ProgressLine

if TYPE_CHECKING:
    from ..server.under_test import ServerUnderTest


def soak_target(target: ServerUnderTest, plan: SoakPlan, header: dict[str, Any], gpu: Any = None,
                progress: ProgressLine | None = None, engine: Any = None) -> SoakOutcome:
    """Soak `target` (a Target) by `plan`, journaling to `plan.journal_path` from the first window."""
    from ..load import LoadEngine

    engine = engine or LoadEngine.for_target(target)
    launcher = target.launcher
    readable = launcher.capabilities.can_read_process_memory  # the server's pid is a process of this host
    container = launcher.capabilities.can_read_container_memory  # the engine's stats
    sampler = Sampler(target.scrape_metrics, plan.models, lambda: launcher.pid if readable else None, gpu,
                      server_memory=launcher.memory_usage if container else None)
    journal = JournalWriter(plan.journal_path, header)
    outcome = None
    try:
        outcome = run_soak(engine, plan, journal, sampler, progress)
    finally:
        extra = {"windows": len(outcome.windows), "ran_s": outcome.ran_s} if outcome else {}
        if outcome is not None and outcome.error:
            extra["error"] = outcome.error
        journal.end(outcome.end_reason if outcome else "error", now_iso(), **extra)
    return outcome


def gpu_instance_models(client: Any, models: list[str]) -> list[str]:
    """Models with a KIND_GPU instance group in their effective config (Triton resolves KIND_AUTO)."""
    return [m for m in models
            if any(g.get("kind") == "KIND_GPU" for g in client.model_config(m).get("instance_group") or [])]
