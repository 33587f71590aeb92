"""Results one check leaves for a later one in the same run, as typed facts.

Each kind of fact is a frozen dataclass that declares the check producing it (`producer`, a
`CheckRef`) and the key it carries in the report (`key`); a fact measured per model has a `model`
field. The run holds one `Facts`: the producing check `publish`es, a later check asks by type,
`get` where the fact is optional and `require` where it cannot go on without it. `require` raises
`FactMissing`, which ends the asking check INCOMPLETE naming the producing check (plugin/results.py).

    facts.publish(Capacity(model="scale", max_throughput_within_slo_infer_s=410.0, ...))
    capacity = facts.require(Capacity, model="scale")   # or FactMissing: "... (PERF-2) ..."

Checks run in phase order, so a producer runs before the checks that read it.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, ClassVar, TypeVar

from .errors import TritonReadyError


@dataclass(frozen=True)
class CheckRef:
    """A check of the checklist by its id and its short name (the test function)."""

    check_id: str
    name: str

    def __str__(self) -> str:
        return f"{self.name} ({self.check_id})"


@dataclass(frozen=True)
class Fact:
    """The base of every fact: `producer` and `key` are declared by each kind."""

    producer: ClassVar[CheckRef]
    key: ClassVar[str]  # its entry in the report's `facts`
    label: ClassVar[str]  # what it is, in words

    @classmethod
    def per_model(cls) -> bool:
        return any(f.name == "model" for f in fields(cls))

    def to_json(self) -> dict[str, Any]:
        """The report's entry (without `model`, which keys it)."""
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name != "model"}

    @classmethod
    def from_json(cls, data: dict[str, Any], model: str | None = None):
        """A fact from its report entry: the inverse of `to_json`."""
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        if model is not None:
            values["model"] = model
        return cls(**values)


FactKind = TypeVar("FactKind", bound=Fact)


@dataclass(frozen=True)
class Capacity(Fact):
    """PERF-2's highest throughput within SLO of one unary model, from its sweep."""

    producer: ClassVar[CheckRef] = CheckRef("PERF-2", "test_throughput_latency_curve")
    key: ClassVar[str] = "perf.capacity"
    label: ClassVar[str] = "the measured throughput within SLO"

    model: str
    max_throughput_within_slo_infer_s: float
    p99_ms: float
    concurrency: int
    instances: int
    slo_p99_ms: float | None = None
    lower_bound: bool = False  # the sweep stopped at its bound while throughput still rose
    throughput_low_infer_s: float | None = None  # the low end of the capacity's confidence interval
    level: float | None = None  # that interval's confidence
    server_cpu_cores: float | None = None  # the server's CPU at that point; None where its processes are not visible


@dataclass(frozen=True)
class TargetLoad(Fact):
    """The load PERF-1 measured one unary model at: a Poisson rate, or a closed-loop concurrency."""

    producer: ClassVar[CheckRef] = CheckRef("PERF-1", "test_benchmark_meets_slo_at_target_load")
    key: ClassVar[str] = "perf.target"
    label: ClassVar[str] = "the target load"

    model: str
    rate: float | None = None  # infer/s offered (the model's min_throughput SLO)
    concurrency: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {"rate": self.rate} if self.rate is not None else {"concurrency": self.concurrency}


@dataclass(frozen=True)
class StreamingCapacity(Fact):
    """PERF-2's best point within the TTFT SLO of one decoupled model, from its streaming sweep."""

    producer: ClassVar[CheckRef] = CheckRef("PERF-2", "test_streaming_tokens_and_ttft_curve")
    key: ClassVar[str] = "perf.streaming_capacity"
    label: ClassVar[str] = "the measured streaming capacity within the TTFT SLO"

    model: str
    max_output_tokens_per_s_within_slo: float
    max_requests_per_s_within_slo: float
    instances: int
    output_tokens_per_request: float | None = None
    concurrency: int | None = None
    ttft_p99_ms: float | None = None
    lower_bound: bool = False


@dataclass(frozen=True)
class StreamingTargetLoad(Fact):
    """What PERF-1 measured for one decoupled model at its target load of streams."""

    producer: ClassVar[CheckRef] = CheckRef("PERF-1", "test_streaming_slo_at_target_load")
    key: ClassVar[str] = "streaming.perf1"
    label: ClassVar[str] = "the streaming measurement at the target load"

    model: str
    ttft_p99_ms: float | None
    itl_p99_ms: float | None
    output_tokens_per_s: float
    concurrency: int


@dataclass(frozen=True)
class ExperimentResult(Fact):
    """A PERF-4 experiment's outcome in a few numbers (its timeline is the check's evidence)."""

    passed: bool
    failed_requests: int | None = None
    recovery_s: float | None = None  # until the reloaded model served
    model: str | None = None  # the model broken; the experiment is one per run, not per model
    incomplete: str | None = None

    @classmethod
    def per_model(cls) -> bool:
        return False

    def to_json(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_json(cls, data: dict[str, Any], model: str | None = None):
        return super().from_json(data)


@dataclass(frozen=True)
class HotReload(ExperimentResult):
    """The forced reload under traffic (PERF-4); OPS-1 reads it as the hot-update procedure exercised."""

    producer: ClassVar[CheckRef] = CheckRef("PERF-4", "test_forced_reload_under_traffic_loses_no_request")
    key: ClassVar[str] = "faults.hot_reload"
    label: ClassVar[str] = "the hot-reload experiment"


@dataclass(frozen=True)
class VersionRollout(ExperimentResult):
    """The rollout of version N+1 under traffic (PERF-4)."""

    producer: ClassVar[CheckRef] = CheckRef("PERF-4", "test_new_version_rollout_under_traffic_loses_no_request")
    key: ClassVar[str] = "faults.version_rollout"
    label: ClassVar[str] = "the version-rollout experiment"


@dataclass(frozen=True)
class CapacityPlan(Fact):
    """OPS-2's fleet plan: the GPUs the declared peak needs against the GPUs declared."""

    producer: ClassVar[CheckRef] = CheckRef("OPS-2", "test_capacity_plan_carries_declared_peak")
    key: ClassVar[str] = "ops.capacity_plan"
    label: ClassVar[str] = "the capacity plan"

    placement: str
    gpus_declared: int | None
    gpus_needed: int | None
    carries_peak: bool
    models: dict[str, dict[str, Any]]  # model -> required, per-instance infer/s, instances and GPUs needed


@dataclass(frozen=True)
class MetricLayers(Fact):
    """MON-1's live value of every metric layer (layer, name, value, unit, model, note)."""

    producer: ClassVar[CheckRef] = CheckRef("MON-1", "test_four_metric_layers_readable")
    key: ClassVar[str] = "monitoring.layers"
    label: ClassVar[str] = "the live metric layers"

    values: tuple[dict[str, Any], ...]

    def to_json(self) -> list[dict[str, Any]]:  # type: ignore[override]  # the report keeps a list
        return list(self.values)

    @classmethod
    def from_json(cls, data: Any, model: str | None = None):
        return cls(tuple(data))


@dataclass(frozen=True)
class DeadInstances(Fact):
    """Every instance of one model found dead so far, by any load check's health watch (health.py):
    dicts of instance, check, test, label, t_s, wall, requests, failed_requests, source, recovered,
    recovery_s."""

    producer: ClassVar[CheckRef] = CheckRef("HEALTH", "the instance-health watch of every load check")
    key: ClassVar[str] = "health.dead_instances"
    label: ClassVar[str] = "the dead model instances"

    model: str
    deaths: tuple[dict[str, Any], ...]

    def to_json(self) -> list[dict[str, Any]]:  # type: ignore[override]
        return list(self.deaths)

    @classmethod
    def from_json(cls, data: Any, model: str | None = None):
        return cls(model, tuple(data))


@dataclass(frozen=True)
class ServerStart(Fact):
    """PERF-4's crash + restart: the time from SIGKILL until the restarted server was ready, the
    start-to-ready time a startup probe must cover."""

    producer: ClassVar[CheckRef] = CheckRef("PERF-4", "test_server_crash_restart_answers_correctly")
    key: ClassVar[str] = "faults.server_start"
    label: ClassVar[str] = "the measured start-to-ready time"

    ready_s: float


@dataclass(frozen=True)
class Drain(Fact):
    """PERF-4's SIGTERM under traffic: from the signal until the process exited, and the requests
    refused meanwhile; what a pod's grace period and preStop delay must cover."""

    producer: ClassVar[CheckRef] = CheckRef("PERF-4", "test_sigterm_under_traffic_is_graceful")
    key: ClassVar[str] = "faults.drain"
    label: ClassVar[str] = "the measured drain under traffic"

    exit_s: float
    refused_requests: int
    exit_timeout_s: float | None = None


@dataclass(frozen=True)
class SoakMemory(Fact):
    """PERF-3's server memory: the peak RSS of the server's process tree and its fitted slope after
    warm-up (with the slope's interval); `leak_judged` False when the soak was too short to tell
    growth from warm-up."""

    producer: ClassVar[CheckRef] = CheckRef("PERF-3", "test_soak_stability")
    key: ClassVar[str] = "soak.memory"
    label: ClassVar[str] = "the soak's server memory peak and slope"

    peak_rss_bytes: float
    slope_mb_h: float | None
    slope_high_mb_h: float | None
    span_s: float
    leak_judged: bool


FACT_TYPES: tuple[type[Fact], ...] = (Capacity, TargetLoad, StreamingCapacity, StreamingTargetLoad, HotReload,
                                 VersionRollout, CapacityPlan, MetricLayers, DeadInstances, ServerStart, Drain,
                                 SoakMemory)
BY_KEY: dict[str, type[Fact]] = {kind.key: kind for kind in FACT_TYPES}


class FactMissing(TritonReadyError, LookupError):
    """A check asked for a fact no earlier check of this run published; names the check that does."""

    def __init__(self, kind: type[Fact], model: str | None = None, because: str | None = None) -> None:
        self.kind, self.model, self.producer = kind, model, kind.producer
        of = f" for {model}" if model is not None else ""
        super().__init__(f"{kind.label}{of} is missing ({kind.key}): {kind.producer} was not part of this run "
                         "or published none" + (f"; {because}" if because else ""))


class Facts:
    """The facts of one run, by kind (and model, for a fact measured per model)."""

    def __init__(self) -> None:
        self._facts: dict[type[Fact], dict[str | None, Fact]] = {}

    def publish(self, fact: Fact) -> None:
        """Keep `fact`, in place of an earlier one of its kind (and model)."""
        model = getattr(fact, "model", None) if type(fact).per_model() else None
        self._facts.setdefault(type(fact), {})[model] = fact

    def withdraw(self, kind: type[Fact], model: str | None = None) -> None:
        """Forget a fact that no longer holds (a model whose instance died in a rerun of its check)."""
        self._facts.get(kind, {}).pop(model, None)

    def get(self, kind: type[FactKind], model: str | None = None) -> FactKind | None:
        """The fact of `kind` (for `model`), or None where it was not published."""
        return self._facts.get(kind, {}).get(model)  # type: ignore[return-value]

    def require(self, kind: type[FactKind], model: str | None = None, because: str | None = None) -> FactKind:
        """The fact of `kind` (for `model`); FactMissing, naming its producer (and `because`: what the
        asking check cannot do without it), where it was not published."""
        fact = self.get(kind, model)
        if fact is None:
            raise FactMissing(kind, model, because)
        return fact

    def of(self, kind: type[FactKind]) -> dict[str, FactKind]:
        """Every model's fact of a per-model `kind`, by model."""
        return dict(self._facts.get(kind, {}))  # type: ignore[arg-type]

    def __bool__(self) -> bool:
        return any(self._facts.values())

    def to_json(self) -> dict[str, Any]:
        """The report's `facts`: each kind under its key, a per-model kind as {model: entry}."""
        document: dict[str, Any] = {}
        for kind in FACT_TYPES:
            published = self._facts.get(kind)
            if not published:
                continue
            if kind.per_model():
                document[kind.key] = {model: fact.to_json() for model, fact in published.items()}
            else:
                document[kind.key] = next(iter(published.values())).to_json()
        return document

    def publish_json(self, document: dict[str, Any]) -> None:
        """Publish the facts of a report's `facts` section (the inverse of `to_json`); an unknown
        key raises KeyError naming it."""
        for key, value in document.items():
            if key not in BY_KEY:
                raise KeyError(f"unknown fact {key!r}; known: {', '.join(BY_KEY)}")
            kind = BY_KEY[key]
            if kind.per_model():
                for model, data in value.items():
                    self.publish(kind.from_json(data, model))
            else:
                self.publish(kind.from_json(value))
