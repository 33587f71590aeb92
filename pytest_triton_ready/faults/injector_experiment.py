"""What every PERF-4 experiment on the injector's server shares (`InjectorExperiment`): the
injector's plan and traffic, and by default its full restore."""

from __future__ import annotations

from typing import Any

from .experiment import Experiment


class InjectorExperiment(Experiment):
    """An experiment on the injector's server: its plan, its traffic, and by default the full
    restore (server up and ready, every instance of the model answering)."""

    destructive = True
    kind: str | None = None  # the fault kind a declared action can stand in for (attach.fault_actions)

    def __init__(self, injector: Any, model: str) -> None:
        super().__init__(model, injector.plan, injector.success_rate_min)
        self.injector = injector

    def unavailable(self) -> str | None:
        return self.injector.destructive_unavailable(self.kind) if self.destructive else None

    def open_traffic(self) -> Any:
        return self.injector._traffic(self.model)

    def restore(self) -> str | None:
        return self.injector.restore(self.model)

    def restore_advice(self) -> str:
        return (f"the server may be down, not ready, or serving {self.model} with a dead instance: restart it "
                f"(or unload + load {self.model}) and check /v2/health/ready and one inference on every instance "
                "before trusting the checks after this one")

