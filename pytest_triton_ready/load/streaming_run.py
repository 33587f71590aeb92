"""What every streaming check needs of the run: the READY decoupled models (NOT APPLICABLE
without one), each model's request plan, a StreamingLoad against the server with the check's
token budget and deadline, a measurement that stops once its rules are decided
(load/streaming_looks.py), and the INCOMPLETE of a measurement too small or too close to judge."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ..models import ready_decoupled_models
from .decision import Rule
from .streaming import StreamingLoad, StreamingResult
from .streaming_looks import StreamingLooks
from .streaming_requests import StreamingPlan


@dataclass
class StreamingRun:
    """One streaming check against the server under test (`triton`), recording on `check`."""

    triton: Any
    check: Any

    def n(self, name: str) -> float:
        """The named threshold's value."""
        return self.check.threshold(name).value

    def models(self) -> list[str]:
        """The READY decoupled models in scope; the check is NOT APPLICABLE without one."""
        models = ready_decoupled_models(self.triton)
        if not models:
            self.check.not_applicable("no READY decoupled (streaming) model in scope")
        return models

    def plan(self, model: str) -> StreamingPlan:
        client = self.triton.client
        return StreamingPlan.from_metadata(model, client.model_metadata(model), client.model_config(model),
                                          declared=client.declared)

    def load(self, plan: StreamingPlan, **kwargs: Any) -> StreamingLoad:
        """A StreamingLoad on the server's gRPC endpoint with the run's headers, each request asking
        for `streaming_max_tokens` and stuck after `streaming_final_deadline_s` unless given."""
        kwargs.setdefault("max_tokens", int(self.n("streaming_max_tokens")))
        kwargs.setdefault("deadline_s", self.n("streaming_final_deadline_s"))
        return StreamingLoad(self.triton.endpoints.grpc_url, plan, headers=self.triton.settings.headers, **kwargs)

    def looks(self, first_s: float, parts: int = 1) -> StreamingLooks:
        """The look schedule of a measurement configured to `first_s`, one of `parts` still to do."""
        return StreamingLooks.from_thresholds(self.check.threshold, first_s, parts)

    def measure(self, plan: StreamingPlan, rules: Sequence[Rule], looks: StreamingLooks,
                **kwargs: Any) -> StreamingResult:
        """Closed-loop or open-loop traffic (`kwargs` as StreamingLoad's) that stops at the first
        look where `rules` are decided, at the latest at `looks.longest_s`."""
        return self.load(plan, duration_s=looks.longest_s, looks_s=looks.times_s,
                         stop_when=lambda stats: looks.decided(rules, stats), **kwargs).run()

    def not_valid(self, reasons: Iterable[str | None]) -> None:
        """A measurement too small or too close to judge: INCOMPLETE naming every reason, unless
        the check already failed on another rule (then a warning)."""
        reason = "; ".join(r for r in reasons if r)
        if not reason:
            return
        if self.check.errors:
            self.check.finding(reason, severity="warning")
        else:
            self.check.incomplete(reason)
