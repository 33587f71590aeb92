"""Does a metric a rule or panel reads exist? Judged against the live endpoint, the recording rules,
and Triton's catalogue, and which of the four layers the metrics cover.

The GPU decision: nv_gpu_* and nv_energy_consumption exist only where the server has GPUs.
- the endpoint exports nv_gpu_* metrics: a GPU metric must be on it like any other;
- the endpoint exports none but GPUs are visible (NVML on the server's host): the metrics are
  missing on this deployment (MIG, or another DCGM agent holds the GPUs): an error;
- the endpoint exports none and no GPU is visible: a catalogued GPU metric is accepted as
  "exists when the server has GPUs", marked not verifiable live, with that reason.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .catalogue import CATALOGUE, CONDITION_HINTS, GPU, LAYERS, PROMETHEUS, family_of, suggestions

LIVE = "live"
RECORDED = "recorded"
SYNTHETIC = "prometheus"
NOT_VERIFIABLE = "not verifiable live"
MISSING = "missing"

GPU_EXPORTED = "the endpoint exports nv_gpu_* metrics"
GPU_NOT_EXPORTED = "GPUs are visible but the endpoint exports no nv_gpu_* metrics"
NO_GPU = "the server has no GPU the endpoint reports"


@dataclass(frozen=True)
class Reference:
    """One metric name and what is known about it."""

    name: str
    status: str
    layers: frozenset[str]
    reason: str = ""

    @property
    def exists(self) -> bool:
        return self.status in (LIVE, RECORDED, SYNTHETIC, NOT_VERIFIABLE)


def gpu_state(live_names: set[str], gpus_visible: bool) -> str:
    """Which of the three GPU situations this deployment is in."""
    if any(n.startswith("nv_gpu_") for n in live_names):
        return GPU_EXPORTED
    return GPU_NOT_EXPORTED if gpus_visible else NO_GPU


@dataclass
class MetricJudge:
    """Classifies metric names for one deployment: the live names, the recording rules (name ->
    metrics read), and the GPU situation."""

    live_names: set[str]
    recordings: dict[str, list[str]] = field(default_factory=dict)
    gpu: str = NO_GPU

    def judge(self, name: str, _seen: frozenset[str] = frozenset()) -> Reference:
        family = family_of(name)
        own_layers = frozenset({family.layer}) if family else frozenset()
        if name in self.recordings:
            inputs = [self.judge(m, _seen | {name}) for m in self.recordings[name] if m not in _seen]
            layers = frozenset().union(*(r.layers for r in inputs)) if inputs else frozenset()
            return Reference(name, RECORDED, layers, "written by a recording rule")
        if name in self.live_names:
            return Reference(name, LIVE, own_layers, "on the live endpoint")
        if family and family.condition == PROMETHEUS:
            return Reference(name, SYNTHETIC, own_layers, "added by Prometheus to every scrape")
        if family and family.condition == GPU and self.gpu == NO_GPU:
            return Reference(name, NOT_VERIFIABLE, own_layers,
                             f"{name} is not verifiable live: {NO_GPU}; {CONDITION_HINTS[GPU]}")
        if family:
            hint = CONDITION_HINTS.get(family.condition, "")
            why = f"; {self.gpu}" if family.condition == GPU else ""
            return Reference(name, MISSING, own_layers,
                             f"{name} is a Triton metric but this server does not export it{why}"
                             + (f" ({hint})" if hint else ""))
        return Reference(name, MISSING, frozenset(), self._unknown(name))

    def _unknown(self, name: str) -> str:
        alternatives = suggestions(name, self.live_names | set(self.recordings))
        if not alternatives:
            return f"{name} does not exist: Triton does not export it and no recording rule writes it"
        described = []
        for alt in alternatives:
            family = CATALOGUE.get(alt)
            if alt in self.live_names:
                described.append(f"{alt} (on this endpoint)")
            elif family and family.condition == GPU and self.gpu == NO_GPU:
                described.append(f"{alt} (exported on servers with GPUs, not verifiable on this one)")
            elif family and family.condition in CONDITION_HINTS:
                described.append(f"{alt} ({CONDITION_HINTS[family.condition]})")
            else:
                described.append(alt)
        return (f"{name} does not exist: Triton does not export it and no recording rule writes it; "
                f"the metric that exists is {' or '.join(described)}")


def covered_layers(references: list[Reference]) -> set[str]:
    """The layers that existing metrics among `references` belong to."""
    return {layer for r in references if r.exists for layer in r.layers}


def missing_layers(references: list[Reference]) -> list[str]:
    covered = covered_layers(references)
    return [layer for layer in LAYERS if layer not in covered]


def live_names(snapshot) -> set[str]:
    """Every metric name a scrape carries: its series' names and its declared families."""
    return snapshot.names | set(snapshot.types)


def live_gpu_state(snapshot, gpu) -> str:
    """`gpu_state` for a scrape and the run's GPU reader."""
    return gpu_state(live_names(snapshot), gpus_visible=bool(gpu.read()))
