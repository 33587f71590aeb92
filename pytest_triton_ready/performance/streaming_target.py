"""PERF-1 for a decoupled model: its SLO at the target load (`streaming_concurrency` streams, closed
loop), measured until TTFT p99, ITL p99, output tokens/s (where a minimum is set) and the success
rate are decided (load/streaming/looks.py), and recorded on the check with their margins: each
rule, the success rate included, on its interval's judgement, never on its value alone (the
success rate only has to show no decided failure). A model whose every stream answers with one
response has no inter-token latency: its ITL and tokens/s rules are not applicable, and TTFT,
success and stuck requests decide."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..facts import StreamingTargetLoad
from ..load.decision import FAIL, Judgement
from ..load.judged import record_judgement
from ..load.streaming.confidence import stream_slo_rules, success_rule
from ..load.streaming.looks import StreamingLooks
from ..load.streaming.stats import StreamStats, report_stuck

if TYPE_CHECKING:
    from ..record.recorder import CheckRecorder

SINGLE_RESPONSE = ("not applicable: every stream answered with one response, so no inter-token latency exists "
                   "and tokens/s is the request rate; TTFT, the success rate and stuck requests are judged")
TTFT_ADVICE = ("TTFT over budget: fewer requests per instance (more instances or a smaller concurrent_requests / "
               "max_num_seqs), a shorter prefill, or a budget that matches the model.")


@dataclass
class TargetMeasurement:
    """One model measured at the target load: its stats, each SLO rule judged, and when it stopped."""

    model: str
    concurrency: int
    slo: dict[str, Any]
    stats: StreamStats
    looks: StreamingLooks
    judged: dict[str, Judgement]
    decided_at_s: float | None

    def fact(self) -> StreamingTargetLoad:
        return StreamingTargetLoad(self.model, ttft_p99_ms=self.stats.ttft_ms["p99"], itl_p99_ms=self.stats.itl_ms["p99"],
                                   output_tokens_per_s=round(self.stats.output_tokens_per_s, 2),
                                   concurrency=self.concurrency)

    def too_few(self) -> str | None:
        """Why the measurement cannot stand for the model (too few completed requests), or None."""
        if self.looks.valid(self.stats):
            return None
        return (f"{self.model}: measurement not valid: {self.stats.completed} requests completed in "
                f"{self.stats.duration_s:.1f} s < minimum {self.looks.min_requests} (streaming_min_requests; a longer "
                "streaming_duration_s measures more)")


def measure_streams_at_target(streaming: Any, model: str, slo: dict[str, Any], parts: int = 1) -> TargetMeasurement:
    """`streaming` (load/streaming_run.StreamingRun) measures `model` at `streaming_concurrency`
    streams after a warm-up (`load_warmup_s`, `load_rewarmup_s`) until its rules are decided;
    `parts`: models still to measure."""
    concurrency = int(streaming.n("streaming_concurrency"))
    looks = streaming.looks(streaming.n("streaming_duration_s"), parts)
    rules = [*stream_slo_rules(slo), success_rule(streaming.n("success_rate_min"))]
    result = streaming.measure(streaming.plan(model), rules, looks, concurrency=concurrency,
                               warmup_s=streaming.warmup_s(model))
    judged = {j.rule.name: j for j in looks.judge(rules, result.stats)}
    return TargetMeasurement(model, concurrency, slo, result.stats, looks, judged, result.decided_at_s)


def record_at_target(check: CheckRecorder, measured: TargetMeasurement) -> list[str]:
    """Record one model's measurement on `check`; returns why it is not decided (none: it is)."""
    model, stats, slo, judged = measured.model, measured.stats, measured.slo, measured.judged
    check.measure("streams (concurrency)", measured.concurrency, "streams", model=model)
    check.measure("requests completed", stats.completed, "requests", model=model)
    check.evidence(f"{model}: measurement length", measured.looks.describe(measured.decided_at_s))
    ttft = judged["TTFT p99"]
    check.measure("TTFT p50", stats.ttft_ms["p50"], "ms", model=model)
    reasons = [measured.too_few(), record_judgement(
        check, ttft, model=model, threshold=slo["ttft_p99_ms"],
        finding=f"{model}: TTFT p99 is {ttft.value} ms, the SLO is <= {slo['ttft_p99_ms'].value:g} ms "
                f"({ttft.estimate.interval.describe('ms', 4) if ttft.estimate.interval else 'no interval'})")]
    if stats.single_response:
        check.evidence(f"{model}: ITL and output tokens/s", SINGLE_RESPONSE)
    else:
        check.measure("ITL p50", stats.itl_ms["p50"], "ms", model=model)
        reasons.append(record_judgement(check, judged["ITL p99"], model=model, threshold=slo["itl_p99_ms"]))
    check.measure("request latency p50", stats.latency_ms["p50"], "ms", model=model)
    check.measure("request latency p99", stats.latency_ms["p99"], "ms", model=model)
    if "output tokens/s" in judged and not stats.single_response:
        reasons.append(record_judgement(check, judged["output tokens/s"], model=model, digits=2,
                                        threshold=slo["min_output_tokens_per_s"]))
    else:
        check.measure("output tokens/s", round(stats.output_tokens_per_s, 2), "tokens/s", model=model)
    reasons.append(record_judgement(check, judged["success rate"], model=model,
                                    threshold=check.threshold("success_rate_min")))
    _record_traffic(check, measured)
    if ttft.outcome == FAIL:
        check.recommend(TTFT_ADVICE)
    return [r for r in reasons if r]


def _record_traffic(check: CheckRecorder, measured: TargetMeasurement) -> None:
    """Per-stream throughput, stuck requests and errors, and the percentiles chart."""
    model, stats = measured.model, measured.stats
    check.measure("output tokens/s per stream (lowest)", round(stats.min_user_tokens_per_s or 0.0, 2), "tokens/s",
                  model=model)
    check.measure("responses/s", round(stats.responses_per_s, 2), "responses/s", model=model)
    check.measure("stuck requests", len(stats.stuck), "requests", model=model, threshold=0)
    report_stuck(check, model, stats.stuck)
    for reason, count in stats.errors.items():
        check.evidence(f"{model} errors", f"{count} x {reason}")
    check.chart(f"{model}: TTFT, ITL and latency percentiles at {measured.concurrency} streams", "percentile", "ms",
                {name: [(float(k[1:]), v) for k, v in values.items() if v is not None]
                 for name, values in (("TTFT", stats.ttft_ms), ("ITL", stats.itl_ms),
                                      ("request latency", stats.latency_ms))})
    check.evidence(f"{model} streaming measurement", str(stats.to_dict()))
