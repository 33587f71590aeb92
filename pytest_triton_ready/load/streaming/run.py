"""What every streaming check needs of the run: the READY decoupled models (NOT APPLICABLE
without one), each model's request plan, a StreamingLoad against the server with the check's
token budget and deadline, a measurement that stops once its rules are decided
(load/streaming/looks.py), and the INCOMPLETE of a measurement too small or too close to judge.

Every load it builds passes the same guards as the unary engine's: the attach ceiling
(`policy.guard_traffic`, as CeilingGuard), the run budget (given explicitly: a measurement that
would start after the check's share is spent does not, as BudgetGuard) and the warm-up thresholds
(`load_warmup_s`, `load_rewarmup_s` for a model this run already streamed to). A measurement the
host's cores cannot drive from one process is split across worker processes (StreamWorkers)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ... import budget
from ...policy import Policy, guard_traffic, policy
from ...server.models import ready_decoupled_models
from ..decision import Rule
from ..judged import incomplete_unless_failed
from ..plan_runners import PlanNotRun
from ..workers import auto_workers, on_this_host
from .looks import StreamingLooks
from .requests import StreamingPlan
from .traffic import StreamingLoad, StreamingResult
from .workers import StreamWorkers

if TYPE_CHECKING:
    from ...record.recorder import CheckRecorder


@dataclass
class StreamingRun:
    """One streaming check against the server under test (`triton`), recording on `check`, under
    `rules` (the attach policy; from the settings when not given), the run budget `run_budget`
    with this check's id `check_id` (None: unbounded), and `driven`: the (model, server changes)
    this run already streamed to (shared across checks for the shorter re-warm-up); `workers`: the
    processes a measurement is split across ("auto": load/workers.auto_workers)."""

    triton: Any
    check: CheckRecorder
    rules: Policy | None = None
    run_budget: budget.RunBudget | None = None
    check_id: str = ""
    driven: set[tuple[str, int]] = field(default_factory=set)
    workers: int | str = "auto"

    @property
    def deadline(self) -> budget.Deadline:
        """This check's share of the run budget (UNBOUNDED without one)."""
        if self.run_budget is None:
            return budget.UNBOUNDED
        return self.run_budget.deadlines.get(self.check_id, budget.UNBOUNDED)

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
        for `streaming_max_tokens` and stuck after `streaming_final_deadline_s` unless given. Above
        the attach ceiling it does not start: the check ends INCOMPLETE naming the switch."""
        return StreamingLoad(self.triton.endpoints.grpc_url, plan, **self._guarded(plan, kwargs))

    def _guarded(self, plan: StreamingPlan, kwargs: dict[str, Any]) -> dict[str, Any]:
        """The load's keywords with the run's defaults, once it passed the attach ceiling."""
        kwargs.setdefault("max_tokens", int(self.n("streaming_max_tokens")))
        kwargs.setdefault("deadline_s", self.n("streaming_final_deadline_s"))
        guard_traffic(self.rules or policy(self.triton.settings), concurrency=kwargs.get("concurrency"), rate=kwargs.get("rate"))
        self.driven.add(self._key(plan.model))
        return {"headers": self.triton.settings.headers, **kwargs}

    def workers_for(self, concurrency: int | None, rate: float | None) -> int:
        """How many processes drive a measurement: `workers`, or with "auto" as many as the load needs
        and the host's cores allow (load/workers.auto_workers, as for unary measurements)."""
        if self.workers != "auto":
            return max(1, int(self.workers))
        return auto_workers(concurrency, rate, server_here=on_this_host(self.triton.endpoints.grpc_url))

    def warmup_s(self, model: str) -> float:
        """`load_warmup_s`, or the shorter `load_rewarmup_s` for a model this run already streamed
        to since the server last changed (as the unary engine's warm-up)."""
        first = self.n("load_warmup_s")
        return min(first, self.n("load_rewarmup_s")) if self._key(model) in self.driven else first

    def _key(self, model: str) -> tuple[str, int]:
        return model, int(getattr(self.triton.client, "changes", 0) or 0)

    def looks(self, first_s: float, parts: int = 1) -> StreamingLooks:
        """The look schedule of a measurement configured to `first_s`, one of `parts` still to do."""
        return StreamingLooks.from_thresholds(self.check.threshold, first_s, parts, self.deadline)

    def measure(self, plan: StreamingPlan, rules: Sequence[Rule], looks: StreamingLooks,
                **kwargs: Any) -> StreamingResult:
        """Closed-loop or open-loop traffic (`kwargs` as StreamingLoad's) that stops at the first
        look where `rules` are decided, at the latest at `looks.longest_s`. After the check's share
        of the run budget is spent it does not start (INCOMPLETE naming the budget)."""
        load = (f"{kwargs['concurrency']} streams" if kwargs.get("concurrency") is not None
                else f"{kwargs.get('rate')} requests/s")
        budget.guard_measurement(self.run_budget, self.check_id, plan.model, load)
        looked = {"duration_s": looks.longest_s, "looks_s": looks.times_s,
                  "stop_when": lambda stats: looks.decided(rules, stats), **kwargs}
        workers = self.workers_for(kwargs.get("concurrency"), kwargs.get("rate"))
        if workers == 1:
            return self.load(plan, **looked).run()
        try:
            result = StreamWorkers(workers, self.triton.endpoints.grpc_url, plan, **self._guarded(plan, looked)).run()
        except PlanNotRun as exc:
            self.check.incomplete(f"{plan.model} at {load}: {exc}")
        self.check.evidence(f"{plan.model} at {load}", f"driven by {result.workers} load worker processes")
        return result

    def not_valid(self, reasons: Iterable[str | None]) -> None:
        """A measurement too small or too close to judge: INCOMPLETE naming every reason, unless
        the check already failed on another rule (then a warning), as for unary measurements."""
        incomplete_unless_failed(self.check, "; ".join(r for r in reasons if r) or None)
