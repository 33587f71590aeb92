"""The state of one run: settings, the target once opened, and every Result recorded so far."""

from __future__ import annotations

import platform
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .duration import now_iso
from .facts import Facts
from .record.model import Result
from .record.verdict import Gaps, overall_verdict, short_list, verdict_reason
from .settings import Settings

if TYPE_CHECKING:
    from .target import Target


@dataclass
class Run:
    settings: Settings
    results: list[Result] = field(default_factory=list)
    target: Target | None = None
    target_error: str | None = None
    started_at: str = field(default_factory=now_iso)
    finished_at: str | None = None
    context: dict[str, Any] = field(default_factory=dict)
    facts: Facts = field(default_factory=Facts)  # what checks leave for later ones (facts.py)
    scope: Any = None  # a gate.Scope once the checklist is collected
    unreachable: bool = False  # the first contact with the server failed; the session stopped there
    waivers: list = field(default_factory=list)  # gate.Waiver from the YAML's gate.waivers
    previous_sigterm: Any = None
    collection_errors: list[str] = field(default_factory=list)
    plan: list[str] = field(default_factory=list)  # the run plan's lines, as printed before the first check
    deployment: Any = None  # deployment.manifest.Manifest from --triton-deployment, read before the first check

    def recorded(self) -> set[str]:
        return {r.nodeid for r in self.results}

    def gaps(self) -> Gaps:
        """What the verdict needs beyond the results: checks in scope not run, expired waivers."""
        allow_flaky = self.settings.section_model("gate").allow_flaky
        if self.scope is None:
            return Gaps(allow_flaky=allow_flaky)
        return Gaps(
            not_run=tuple(i.nodeid for i in self.scope.not_run(self.recorded())),
            expired_waivers=tuple(f"{w.check} (expired {w.expires}, {w.owner})" for w in self.scope.expired_waivers()),
            allow_flaky=allow_flaky,
        )

    def verdict(self) -> str:
        return overall_verdict(self.results, self.gaps())

    def verdict_reason(self) -> str:
        if self.unreachable and self.target_error:
            unreached = sum(1 for r in self.results if r.reason == f"not run: {self.target_error}")
            return f"{self.target_error}; the run stopped there: {unreached} of {len(self.results)} checks did not run"
        return verdict_reason(self.results, self.gaps()) + self.models_left_out()

    def models_left_out(self) -> str:
        """'; models not checked: ...' when --triton-models left out models the server lists, else ''."""
        scope = self.settings.triton_models
        if not scope:
            return ""
        listed = [m.get("name") for m in self.context.get("models") or [] if m.get("name")]
        left = sorted(set(listed) - set(scope))
        if not left:
            return ""
        return (f"; {len(left)} of the {len(set(listed))} models the server lists were not checked (--triton-models): "
                f"{short_list(left)}")

    def collect_context(self) -> dict[str, Any]:
        """Server version, extensions and models, GPUs, runner versions; what the report's header shows."""
        from . import __version__
        from .run_context import gpu_inventory

        context: dict[str, Any] = {
            "runner": {"pytest_triton_ready": __version__, "python": platform.python_version(),
                       "host": platform.node()},
            "launcher": self.settings.launch,
        }
        if self.target is not None:
            client = self.target.client
            try:
                meta = client.server_metadata()
                context["server"] = {"name": meta.get("name"), "version": meta.get("version"),
                                     "extensions": meta.get("extensions", [])}
                context["models"] = [
                    {"name": e.get("name"), "version": e.get("version"), "state": e.get("state"),
                     "reason": e.get("reason")}
                    for e in client.repository_index()
                ]
            except Exception as exc:  # the server may be gone by now; the report says so
                context["server_error"] = str(exc)
            context["endpoints"] = vars(self.target.endpoints)
        elif self.target_error:
            context["server_error"] = self.target_error
        context["gpus"] = gpu_inventory(self.target)
        context.update(self.context)
        return context
