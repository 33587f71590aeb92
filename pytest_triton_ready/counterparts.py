"""Which streaming check covers a unary check's item on a deployment that serves only decoupled
models: one entry per unary check (by its short name), naming the streaming check
(checks/test_streaming.py) by id and short name, and how it covers the item. A unary check never
names its counterpart itself: `models.defer_to_streaming` looks it up here."""

from __future__ import annotations

from dataclasses import dataclass

from .facts import CheckRef


@dataclass(frozen=True)
class Counterpart:
    """The streaming check that covers a unary check's item, and how it does."""

    check: CheckRef
    how: str


STREAMING_COUNTERPARTS: dict[str, Counterpart] = {
    "test_models_answer_inference": Counterpart(
        CheckRef("CFG-1", "test_streaming_answers_end_with_final_flag"),
        "sends them streamed requests and checks every answer's output and final flag"),
    "test_benchmark_meets_slo_at_target_load": Counterpart(
        CheckRef("PERF-1", "test_streaming_slo_at_target_load"),
        "measures TTFT, ITL and output tokens/s at the target load against the streaming SLO"),
    "test_throughput_latency_curve": Counterpart(
        CheckRef("PERF-2", "test_streaming_tokens_and_ttft_curve"),
        "sweeps concurrent streams and publishes the output tokens/s capacity within the TTFT SLO"),
    "test_soak_stability": Counterpart(
        CheckRef("PERF-3", "test_streaming_soak_every_request_finishes"),
        "soaks streams: every request must end with its final response and server memory stay flat"),
    "test_dead_instance_is_reported_and_recovers": Counterpart(
        CheckRef("PERF-4", "test_streaming_dead_stub_is_reported_and_recovers"),
        "kills a python stub under streams, checks the streams end and the ready endpoints, "
        "and recovers it with unload + load"),
    "test_sigterm_under_traffic_is_graceful": Counterpart(
        CheckRef("PERF-4", "test_streaming_sigterm_ends_streams_cleanly"),
        "sends SIGTERM with streams in flight and checks every one ends with its final response "
        "and the server exits 0"),
}


def streaming_counterpart(name: str) -> Counterpart:
    """The counterpart of the unary check `name` (its short name, parameters left out); KeyError
    naming the check when it has none declared here."""
    short = name.split("::")[-1].split("[")[0]
    try:
        return STREAMING_COUNTERPARTS[short]
    except KeyError:
        raise KeyError(f"{short} has no streaming counterpart in counterparts.STREAMING_COUNTERPARTS") from None
