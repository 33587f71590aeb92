"""Scrape and read Triton's Prometheus endpoint, parsed with prometheus_client's own parser."""

from __future__ import annotations

import re
import time
import urllib.error
import urllib.request
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from prometheus_client.parser import text_string_to_metric_families

from ..errors import TritonReadyError
from .client import describe_connection_error

CORE_FAMILIES = (
    "nv_inference_request_success",
    "nv_inference_request_failure",
    "nv_inference_count",
    "nv_inference_exec_count",
    "nv_inference_request_duration_us",
    "nv_inference_queue_duration_us",
    "nv_inference_compute_infer_duration_us",
)


class MetricsError(TritonReadyError, RuntimeError):
    """The metrics endpoint did not answer, or answered something that is not Prometheus text."""


@dataclass(frozen=True)
class Sample:
    name: str
    labels: Mapping[str, str]
    value: float


@dataclass
class MetricsSnapshot:
    """One scrape: every sample, the declared family types, and when it was taken."""

    samples: list[Sample]
    types: dict[str, str] = field(default_factory=dict)
    taken_at: float = field(default_factory=time.monotonic)
    scrape_s: float = 0.0

    @classmethod
    def parse(cls, text: str) -> MetricsSnapshot:
        """Parse Prometheus text exposition; MetricsError names the first line that fails."""
        samples: list[Sample] = []
        types: dict[str, str] = {}
        exposed = _exposed_names(text)
        try:
            for family in text_string_to_metric_families(text):
                types[family.name] = family.type
                for s in family.samples:
                    samples.append(Sample(_as_exposed(s.name, exposed), dict(s.labels), float(s.value)))
        except ValueError as exc:
            raise MetricsError(f"metrics are not valid Prometheus text: {exc}") from None
        return cls(samples, types)

    @property
    def names(self) -> set[str]:
        """Every sample name present (with _sum/_count/_bucket suffixes as exposed)."""
        return {s.name for s in self.samples}

    def select(self, name: str, **labels: str) -> list[Sample]:
        return [s for s in self.samples if s.name == name and all(s.labels.get(k) == v for k, v in labels.items())]

    def total(self, name: str, **labels: str) -> float:
        """Sum of every sample of `name` whose labels match `labels`."""
        return sum(s.value for s in self.select(name, **labels))

    def delta(self, earlier: MetricsSnapshot, name: str, **labels: str) -> float:
        """How much a counter grew since `earlier`."""
        return self.total(name, **labels) - earlier.total(name, **labels)

    def missing(self, names: Iterable[str]) -> list[str]:
        present = self.names | set(self.types)
        return [n for n in names if n not in present]


def _exposed_names(text: str) -> set[str]:
    names = set()
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            names.add(re.split(r"[{\s]", line, maxsplit=1)[0])
    return names


def _as_exposed(name: str, exposed: set[str]) -> str:
    """The parser names counter samples `<family>_total`; Triton's counters carry no such suffix."""
    if name not in exposed and name.endswith("_total") and name[: -len("_total")] in exposed:
        return name[: -len("_total")]
    return name


def scrape(url: str, headers: Mapping[str, str] | None = None, timeout_s: float = 5.0) -> MetricsSnapshot:
    """GET the metrics URL and parse it."""
    started = time.perf_counter()
    request = urllib.request.Request(url, headers=dict(headers or {}))
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            body = response.read().decode("utf-8", errors="replace")
    except urllib.error.HTTPError as exc:
        raise MetricsError(f"metrics endpoint {url} answered HTTP {exc.code}") from None
    except (urllib.error.URLError, OSError) as exc:
        raise MetricsError(describe_connection_error(url, exc).replace("Triton", "Triton metrics")) from None
    snapshot = MetricsSnapshot.parse(body)
    snapshot.scrape_s = time.perf_counter() - started
    return snapshot
