"""The key numbers of a run, per model, read from its readiness document (or its Results).

One reading serves the report's key-numbers table, PERF-5's comparison with a baseline run and the
history index: capacity within SLO (PERF-2), p50/p99 and error rate at the target load (PERF-1),
p99 drift and memory slopes of the soak (PERF-3), the worst recovery time (PERF-4), and the
window-to-window noise PERF-5 recorded. Decoupled (streaming) models add TTFT p99 and ITL p99 at
the target load (PERF-1) and output tokens/s within the TTFT SLO (PERF-2), as
checks/test_streaming.py records them; they have no windows, so PERF-5 measures their noise as
the spread of repeated streaming measurements at the curve's best point. Numbers a run did not measure are simply absent.

Soak and recovery numbers that a check recorded without a model belong to the whole run: they are
kept under the model key ALL ("all models").
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

ALL = "*"  # run-wide numbers (the soak drives every model at once)


@dataclass(frozen=True)
class Metric:
    key: str
    label: str
    unit: str
    better: str  # "higher" | "lower"
    threshold: str  # the named threshold of PERF-5's rule
    relative: bool  # the threshold is a ratio of the baseline value (else an absolute rise)
    noise: str | None  # which recorded window noise applies ("throughput", "p50", "p99"), if any
    share: bool = False  # a ratio that is a share of a whole (printed as a percentage); else printed as a ratio


METRICS: tuple[Metric, ...] = (
    Metric("capacity", "capacity within SLO", "infer/s", "higher", "regression_capacity_drop_max", True, "throughput"),
    Metric("p50", "p50 at target load", "ms", "lower", "regression_p50_rise_max", True, "p50"),
    Metric("p99", "p99 at target load", "ms", "lower", "regression_p99_rise_max", True, "p99"),
    Metric("error_rate", "error rate at target load", "ratio", "lower", "regression_error_rate_rise_max", False, None,
           share=True),
    Metric("soak_drift", "soak p99 drift (last/first)", "ratio", "lower", "regression_drift_rise_max", True, None),
    Metric("leak_slope", "memory slope (worst)", "MB/h", "lower", "regression_memory_slope_rise_max_mb_h", False, None),
    Metric("recovery", "worst recovery time", "s", "lower", "regression_recovery_rise_max", True, None),
    # streaming: PERF-5 measures the spread of repeated streaming measurements at the curve's best point
    Metric("ttft_p99", "TTFT p99 at target load", "ms", "lower", "regression_p99_rise_max", True, "streaming_ttft"),
    Metric("itl_p99", "ITL p99 at target load", "ms", "lower", "regression_p99_rise_max", True, "streaming_itl"),
    Metric("tokens_capacity", "output tokens/s within TTFT SLO", "tokens/s", "higher", "regression_capacity_drop_max",
           True, "streaming_tokens"),
)
# The streaming checks' measurement names (checks/test_streaming.py) that are key numbers.
STREAMING_NAMES = {("PERF-1", "TTFT p99"): "ttft_p99", ("PERF-1", "ITL p99"): "itl_p99",
                   ("PERF-2", "max output tokens/s within TTFT SLO"): "tokens_capacity"}
METRIC_BY_KEY = {m.key: m for m in METRICS}

# PERF-5 records these per model; a later run reads them as the baseline's noise.
NOISE_PREFIX = "noise: "
NOISE_NAMES = {"throughput": "noise: throughput window spread (relative standard error)",
               "p50": "noise: p50 window spread (relative standard error)",
               "p99": "noise: p99 window spread (relative standard error)",
               "streaming_tokens": "noise: output tokens/s repeat spread (relative standard error)",
               "streaming_ttft": "noise: TTFT p99 repeat spread (relative standard error)",
               "streaming_itl": "noise: ITL p99 repeat spread (relative standard error)"}
CONFIG_DIGEST = "model config digest"


def _results(source: Any) -> list[dict[str, Any]]:
    """Result dicts from a readiness document, a list of Result dicts, or a list of Results."""
    if isinstance(source, dict):
        source = source.get("results", [])
    return [r if isinstance(r, dict) else r.to_dict() for r in source]


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or value is None:
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if number == number and abs(number) != float("inf") else None


def _measurements(results: Iterable[dict[str, Any]], check_id: str) -> Iterable[dict[str, Any]]:
    for result in results:
        if result.get("check_id") == check_id:
            yield from result.get("measurements", [])


# The soak's slope measurements and the leak rule each belongs to (soak/judge.py).
SLOPE_RULES = {"server process tree RSS slope": "server-memory-leak",
               "server host used memory (nv_cpu_memory_used_bytes) slope": "host-memory-leak",
               "GPU memory used slope": "gpu-memory-leak"}


def _judged_rules(results: list[dict[str, Any]]) -> set[str] | None:
    """The rules the soak judged; None for documents from before the ledger (no `judgements`),
    which are read as they were."""
    soaks = [r for r in results if r.get("check_id") == "PERF-3" and "judgements" in r]
    if not soaks:
        return None
    return {j.get("rule") for r in soaks for j in r["judgements"]}


def key_numbers(source: Any) -> dict[str, dict[str, float]]:
    """{model: {metric key: value}} for every key number the run recorded; run-wide ones under ALL."""
    results = _results(source)
    numbers: dict[str, dict[str, float]] = {}

    def put(model: str | None, key: str, value: Any, combine=None) -> None:
        number = _number(value)
        if number is None:
            return
        row = numbers.setdefault(model or ALL, {})
        row[key] = combine(row[key], number) if combine and key in row else number

    for m in _measurements(results, "PERF-2"):
        if m.get("name") == "max throughput within SLO":
            put(m.get("model"), "capacity", m.get("value"))
    for (check_id, name), key in STREAMING_NAMES.items():
        for m in _measurements(results, check_id):
            if m.get("name") == name:
                put(m.get("model"), key, m.get("value"))
    for m in _measurements(results, "PERF-1"):
        name = m.get("name")
        if name == "p50 latency":
            put(m.get("model"), "p50", m.get("value"))
        elif name == "p99 latency":
            put(m.get("model"), "p99", m.get("value"))
        elif name == "success rate" and _number(m.get("value")) is not None:
            put(m.get("model"), "error_rate", round(1.0 - float(m["value"]), 6))
    judged = _judged_rules(results)
    for m in _measurements(results, "PERF-3"):
        name, unit = m.get("name", ""), m.get("unit")
        if name.startswith("p99 drift") and unit == "ratio":
            put(m.get("model"), "soak_drift", m.get("value"))
        elif name.endswith(" slope") and unit == "MB/h" and "runner" not in name and (
                judged is None or SLOPE_RULES.get(name) in judged):  # a slope no leak rule judged is no key number
            put(m.get("model"), "leak_slope", m.get("value"), max)
    for m in _measurements(results, "PERF-4"):
        if m.get("unit") == "s" and str(m.get("name", "")).startswith("time "):
            put(m.get("model"), "recovery", m.get("value"), max)
    for m in _measurements(results, "PERF-5"):
        name = m.get("name", "")
        for kind, noise_name in NOISE_NAMES.items():
            if name == noise_name:
                put(m.get("model"), f"noise_{kind}", m.get("value"))
    return numbers


def config_digests(source: Any) -> dict[str, str]:
    """{model: digest of its config} as PERF-5 recorded them."""
    return {m["model"]: str(m["value"]) for m in _measurements(_results(source), "PERF-5")
            if m.get("name") == CONFIG_DIGEST and m.get("model")}


def model_label(model: str) -> str:
    return "all models" if model == ALL else model


def ordered_models(numbers: dict[str, Any]) -> list[str]:
    """Models by name, the run-wide row last."""
    return sorted(m for m in numbers if m != ALL) + ([ALL] if ALL in numbers else [])
