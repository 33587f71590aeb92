"""LoadEngine: the load generator a check (or a fault experiment, or the soak) drives.

    engine = LoadEngine.for_target(triton)            # or the `load` fixture
    with engine.open_loop("scale", rate=300, poisson=True) as traffic:
        ...                                           # do things meanwhile
        traffic.event("reload")
    traffic.result.stats.p99_ms, traffic.result.timeline.to_dict()

    m = engine.measure("scale", concurrency=16)       # windowed, with stability and validity
    m.stats.throughput_infer_s, m.stable, m.valid, m.server.models["scale"].average_batch_size

    m = engine.measure("scale", concurrency=16, judge=[Rule("p99 latency", "p99", "<=", 100.0, "ms")])
    m.judgements[0].outcome                           # stops once every rule is decided (load/decision.py)

    m = engine.measure("scale", concurrency=16, judge=other_rules, reuse=True)
    m.reused_after_s                                  # the windows measured above, if they decide these rules too
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from .background import BackgroundTraffic
from .client_health import ClientLimits, fell_behind, guard, is_behind, saturated
from .decision import UNDECIDED, Judgement, Rule, decided_enough, judge_measurement
from .errors import dead_instances
from .plan_runners import ClusterRunner, LocalRunner, PlanNotRun, PlanRunner, ProcessRunner
from .requests import DEFAULT_POOL_SIZE, RequestPool, build_pool
from .senders import make_sender
from .server_side import ModelWindow, ServerProbe, ServerWindow
from .stability import MeasureRules, stability, validity
from .stats import Stats, Tally, merged
from .timeline import Timeline
from .traffic import DEFAULT_LATE_DROP_S, DEFAULT_MAX_IN_FLIGHT, Traffic, TrafficPlan, TrafficResult, Window
from .workers import auto_workers, on_this_host

if TYPE_CHECKING:
    from ..server.under_test import ServerUnderTest


@dataclass
class Measurement:
    """One load point measured by windows: the stats of the windows reported (merged), whether the
    run was stable and valid (and why), and the server's view of the same windows.

    Measured with rules to judge (`judged`), every window after warm-up is reported, each rule
    carries its Judgement (value, interval, outcome), and stability is evidence, not a gate."""

    model: str
    mode: str
    concurrency: int | None
    rate: float | None
    stats: Stats
    windows: list[Window]
    stable: bool
    stability_detail: str
    valid: bool
    validity_detail: str
    rules: MeasureRules
    server: ServerWindow | None = None
    protocol: str = "grpc"
    workers: int = 1
    traffic: TrafficResult | None = field(default=None, repr=False)
    cluster: dict[str, Any] | None = None  # Ray workers: address, nodes, clock offsets (load/ray_workers.py)
    judgements: list[Judgement] = field(default_factory=list)
    judged: bool = False
    reused_after_s: float | None = None  # the windows of an earlier measurement, judged again this long after it ended
    client_limits: ClientLimits = field(default_factory=ClientLimits)

    @property
    def client_behind(self) -> str | None:
        """'the load generator fell behind (...)' where it did in any window, else None (load/client_health.py)."""
        return fell_behind(self.windows, self.client_limits)

    @property
    def client_limited(self) -> str | None:
        """'limited by the load generator (...)' where the client was saturated: the throughput is a lower bound."""
        return saturated(self.stats, self.workers, self.client_limits)

    def client_health(self) -> dict[str, Any]:
        """The load generator's health over the reported windows (units in the names), and its verdicts."""
        return {**self.stats.client_health(), "workers": self.workers, "behind": self.client_behind,
                "limited": self.client_limited}

    @property
    def trustworthy(self) -> bool:
        """Valid, and stable unless its rules were judged with confidence: the only kind of
        measurement a latency or throughput rule may pass on."""
        return self.valid and (self.stable or self.judged)

    def judgement(self, name: str) -> Judgement | None:
        """The judgement of the rule named `name`, if it was judged."""
        return next((j for j in self.judgements if j.rule.name == name), None)

    def too_close(self) -> list[str]:
        """'too close to call: p99 latency 98.7 ms, 95% interval [...] ms, rule <= 100 ms' per undecided rule;
        'p99 latency: the load generator fell behind (...)' per latency rule left unjudged for it."""
        return ([f"too close to call: {j.describe()}" for j in self.judgements if j.outcome == UNDECIDED and not j.settled]
                + [f"{j.rule.name}: {j.outcome}" for j in self.judgements if is_behind(j.outcome)])

    @property
    def server_model(self) -> ModelWindow | None:
        return self.server.models.get(self.model) if self.server else None

    def problem(self) -> str | None:
        """Why this measurement cannot be trusted, or None."""
        problems = []
        if not self.stable and not self.judged:
            problems.append(f"unstable ({self.stability_detail})")
        if not self.valid:
            problems.append(f"invalid ({self.validity_detail})")
        return "; ".join(problems) or None

    def to_dict(self) -> dict[str, Any]:
        return {"model": self.model, "mode": self.mode, "concurrency": self.concurrency, "rate": self.rate,
                "protocol": self.protocol, "workers": self.workers, "stats": self.stats.to_dict(),
                "stable": self.stable, "stability": self.stability_detail, "valid": self.valid,
                "validity": self.validity_detail, "rules": self.rules.describe(),
                "server": self.server.to_dict() if self.server else None,
                "windows": [w.to_dict() for w in self.windows], "client": self.client_health(),
                **({"judgements": [j.to_dict() for j in self.judgements]} if self.judged else {}),
                **({"cluster": self.cluster} if self.cluster is not None else {})}


class LoadEngine:
    """Builds request pools and runs closed- or open-loop traffic against one server."""

    def __init__(self, client: Any, grpc_url: str, http_url: str, headers: Mapping[str, str] | None = None,
                 timeout_s: float = 30.0, probe_factory: Callable[[list[str]], ServerProbe] | None = None,
                 settings: Any = None) -> None:
        self.client = client
        self.grpc_url = grpc_url
        self.http_url = http_url
        self.headers = dict(headers or {})
        self.timeout_s = timeout_s
        self.probe_factory = probe_factory
        self.settings = settings
        self._pools: dict[tuple[str, int], RequestPool] = {}
        self._recent = RecentMeasurements()
        self._driven: set[tuple[str, int]] = set()  # (model, server changes) measured so far: warmed up
        # A request unanswered this long counts as failed (timeout) at a window's end and at the stop.
        self.request_timeout_s: float | None = _request_timeout(settings)

    @classmethod
    def for_target(cls, target: ServerUnderTest, gpu_reader: Any = None) -> LoadEngine:
        settings = target.settings
        return cls(target.client, target.endpoints.grpc_url, target.endpoints.http_url, settings.headers,
                   max(30.0, settings.triton_request_timeout),
                   lambda models: ServerProbe.for_target(target, models, gpu_reader), settings)

    # -- requests ----------------------------------------------------------------------------
    def pool(self, model: str, batch_size: int = 1, size: int = DEFAULT_POOL_SIZE) -> RequestPool:
        """Prebuilt random requests for `model` (cached per model and batch size)."""
        key = (model, batch_size)
        if key not in self._pools:
            self._pools[key] = build_pool(self.client, model, batch_size=batch_size, size=size)
        return self._pools[key]

    def forget_pools(self) -> None:
        """Drop cached requests (after a model's inputs changed, e.g. a reload with a new config)."""
        self._pools.clear()
        self.server_changed()

    def server_changed(self) -> None:
        """The server was restarted, or a model reloaded or broken: no earlier measurement may
        stand in for a new one (`measure(..., reuse=True)`), and every model warms up again."""
        self._recent.clear()
        self._driven.clear()

    # -- traffic in the background -----------------------------------------------------------
    def open_loop(self, models: str | list[str] | Mapping[str, float], rate: float | None = None, *,
                  poisson: bool = False, protocol: str = "grpc", batch_size: int = 1,
                  duration_s: float | None = None, warmup_s: float = 0.0, bin_s: float | None = Timeline.DEFAULT_BIN_S,
                  max_bins: int = Timeline.DEFAULT_MAX_BINS, window_s: float | None = None,
                  on_window: Callable[[Window], Any] | None = None, server_stats: bool = False,
                  max_in_flight: int = DEFAULT_MAX_IN_FLIGHT, late_drop_s: float = DEFAULT_LATE_DROP_S,
                  seed: int | None = None) -> BackgroundTraffic:
        """Open-loop traffic (not yet started: use `with`, or `.start()` then `.stop()`).

        `models` is one model, a list (each sent `rate` requests/s) or {model: rate}. Requests are
        due at a fixed interval, or at Poisson arrivals with `poisson=True`. Latency counts from
        the time a request was due; one that cannot be sent on time is dropped and counted.
        `window_s` closes a measurement window every so many seconds (stats per window, server
        deltas when `server_stats`), handed to `on_window` and to `.windows()`.
        """
        rates = _positive(_rates(models, rate), "rate")
        plan = TrafficPlan({m: self.pool(m, batch_size) for m in rates}, "open", rates=rates, poisson=poisson,
                           warmup_s=warmup_s, window_s=window_s, bin_s=bin_s, max_bins=max_bins,
                           max_in_flight=max_in_flight, late_drop_s=late_drop_s, duration_s=duration_s, seed=seed,
                           request_timeout_s=self.request_timeout_s)
        return self.background(plan, protocol, server_stats, on_window)

    def closed_loop(self, models: str | list[str] | Mapping[str, int], concurrency: int | None = None, *,
                    protocol: str = "grpc", batch_size: int = 1, duration_s: float | None = None,
                    warmup_s: float = 0.0, bin_s: float | None = Timeline.DEFAULT_BIN_S,
                    max_bins: int = Timeline.DEFAULT_MAX_BINS, window_s: float | None = None,
                    on_window: Callable[[Window], Any] | None = None, server_stats: bool = False) -> BackgroundTraffic:
        """Closed-loop traffic: `concurrency` requests in flight per model (or {model: n})."""
        counts = {m: int(n) for m, n in _positive(_rates(models, concurrency), "concurrency").items()}
        plan = TrafficPlan({m: self.pool(m, batch_size) for m in counts}, "closed", concurrency=counts,
                           warmup_s=warmup_s, window_s=window_s, bin_s=bin_s, max_bins=max_bins,
                           duration_s=duration_s, request_timeout_s=self.request_timeout_s)
        return self.background(plan, protocol, server_stats, on_window)

    def run(self, traffic: BackgroundTraffic) -> TrafficResult:
        """Start traffic that has a duration and wait for it to end."""
        traffic.start()
        traffic.wait()
        return traffic.stop()

    def background(self, plan: TrafficPlan, protocol: str, server_stats: bool,
                   on_window: Callable[[Window], Any] | None,
                   stop_when: Callable[[list[Window]], bool] | None = None) -> BackgroundTraffic:
        """The plan as traffic in a background thread (not started), its sender made for `protocol`."""
        probe = self.probe_factory(list(plan.pools)) if server_stats and self.probe_factory else None
        in_flight = sum(plan.concurrency.values()) or plan.max_in_flight

        def make(window_callback: Callable[[Window], Any]) -> Traffic:
            sender = make_sender(protocol, self.grpc_url, self.http_url, self.headers, self.timeout_s,
                                 min(in_flight, 256))
            return Traffic(plan, sender, probe, window_callback, stop_when)

        return BackgroundTraffic(make, on_window)

    # -- windowed measurements ---------------------------------------------------------------
    def rules(self, **overrides: Any) -> MeasureRules:
        """The measurement rules from the settings' thresholds (defaults without settings)."""
        if self.settings is None:
            return MeasureRules(**overrides)
        return MeasureRules.from_settings(self.settings, **overrides)

    def measure(self, model: str, *, concurrency: int | None = None, rate: float | None = None,
                rules: MeasureRules | None = None, protocol: str = "grpc", batch_size: int = 1,
                poisson: bool = False, server_stats: bool = True, workers: int | str = "auto",
                stop_on_dead_instance: bool = True, judge: Sequence[Rule] | None = None,
                reuse: bool = False) -> Measurement:
        """Measure one load point (closed loop at `concurrency`, or open loop at `rate`): warm-up,
        then windows until the last ones are stable and valid or `max_windows` is reached.
        `judge`: rules to decide instead (load/decision.py): windows until every rule's interval at
        `rules.confidence` lies on one side of its threshold on a valid measurement (or the success
        rate is decidedly too low, whatever the validity), at most `max_windows`.
        `workers`: processes sharing the load ("auto": from the cores and the load, see workers.py).
        `stop_on_dead_instance`: end at the first window in which a request failed because a model
        instance died ("Stub process ... is not healthy"): numbers measured on a broken model mean
        nothing, and the check fails on the dead instance whatever they are.
        `reuse`: a closed-loop measurement with rules to judge may be the windows of the last one
        at the same model, concurrency, protocol, batch size and windows (`RecentMeasurements`),
        judged again on `judge`, where those rules are settled on them; else it is measured. That
        look at the earlier windows is one more look at the rules (`MeasureRules.extra_looks`):
        with the measurement's own L looks, each is at 1 - (1 - confidence) / (L + 1)."""
        if (concurrency is None) == (rate is None):
            raise ValueError("measure needs exactly one of concurrency (closed loop) or rate (open loop)")
        rules = self._warm_up(model, rules or self.rules())
        judged = list(judge) if judge is not None else None
        # the same load point and windows, whatever the level its rules are judged at
        key = (model, concurrency, protocol, batch_size, replace(rules, warmup_s=0.0, extra_looks=0, shares=1),
               self._server_changes())
        if reuse and judged is not None and concurrency is not None and self._recent.holds(key):
            # the look at the earlier windows and this measurement's own looks share one error budget
            rules = replace(rules, extra_looks=rules.extra_looks + 1)
            earlier = self._recent.judged_again(key, judged, rules)
            if earlier is not None:
                return self._guarded(earlier)
        measurement = self._measure(model, concurrency, rate, rules, protocol, batch_size, poisson, server_stats,
                                    workers, stop_on_dead_instance, judged)
        if judged is not None and concurrency is not None and measurement.windows:
            self._recent.keep(key, measurement)
        if measurement.windows:
            self._driven.add((model, self._server_changes()))
        return self._guarded(measurement)

    def _guarded(self, measurement: Measurement) -> Measurement:
        """`measurement` with the client limits of the settings, its latency rules not failed on
        windows where the load generator fell behind (load/client_health.py)."""
        limits = ClientLimits.from_settings(self.settings) if self.settings is not None else ClientLimits()
        return replace(measurement, client_limits=limits,
                       judgements=guard(measurement.judgements, measurement.windows, limits))

    def _warm_up(self, model: str, rules: MeasureRules) -> MeasureRules:
        """`rules`, with the shorter warm-up `load_rewarmup_s` for a model this run already measured
        since the server last changed."""
        if (model, self._server_changes()) not in self._driven or self.settings is None:
            return rules
        try:
            rewarm = float(self.settings.threshold("load_rewarmup_s").value)
        except (KeyError, AttributeError):
            return rules
        return replace(rules, warmup_s=rewarm) if rules.warmup_s > rewarm else rules

    def _server_changes(self) -> int:
        """How many models the run's client loaded or unloaded so far (a reload is a changed server)."""
        return int(getattr(self.client, "changes", 0) or 0)

    def _measure(self, model: str, concurrency: int | None, rate: float | None, rules: MeasureRules, protocol: str,
                 batch_size: int, poisson: bool, server_stats: bool, workers: int | str,
                 stop_on_dead_instance: bool, judged: list[Rule] | None) -> Measurement:
        pool = self.pool(model, batch_size)
        kept = rules.max_windows if judged is not None else rules.stability_windows

        def done(windows: list[Window]) -> bool:
            return measurement_done(windows, rules, judged, model, stop_on_dead_instance)

        if concurrency is not None:
            plan = TrafficPlan({model: pool}, "closed", concurrency={model: concurrency}, warmup_s=rules.warmup_s,
                               window_s=rules.window_s, bin_s=None, keep_tallies=kept,
                               keep_window_tallies=judged is not None, request_timeout_s=self.request_timeout_s)
        else:
            plan = TrafficPlan({model: pool}, "open", rates={model: rate}, poisson=poisson, warmup_s=rules.warmup_s,
                               window_s=rules.window_s, bin_s=None, keep_tallies=kept,
                               keep_window_tallies=judged is not None, request_timeout_s=self.request_timeout_s)
        runner = self.runner_for(model, concurrency, rate, protocol, server_stats, workers)
        try:
            result = runner.run(plan, done)
        except PlanNotRun as exc:
            empty = Stats(0, {}, 0, 0.0, 0.0, {"p50": None, "p90": None, "p95": None, "p99": None, "p99.9": None})
            return Measurement(model, plan.mode, concurrency, rate, empty, [], False, "not measured", False, str(exc),
                               rules, None, protocol, runner.workers, cluster=runner.cluster)
        measurement = measurement_from(model, result, rules, concurrency, rate, protocol, runner.workers, judged)
        measurement.cluster = runner.cluster
        return measurement

    def runner_for(self, model: str, concurrency: int | None, rate: float | None, protocol: str, server_stats: bool,
                   workers: int | str) -> PlanRunner:
        """Where a measurement runs: on the Ray cluster of `--triton-load-cluster` when one is set, else in
        `workers` processes (`"auto"`: as many as the load needs and the spare cores allow, half of
        them when the server is on this host: load/workers.auto_workers), else here."""
        cluster = getattr(self.settings, "triton_load_cluster", None)
        server_here = on_this_host(self.grpc_url if protocol == "grpc" else self.http_url)
        count = auto_workers(concurrency, rate, server_here=server_here) if workers == "auto" else max(1, int(workers))
        if not cluster and count == 1:
            return LocalRunner(self, protocol, server_stats)
        probe = self.probe_factory([model]) if server_stats and self.probe_factory else None
        transport = {"protocol": protocol, "grpc_url": self.grpc_url, "http_url": self.http_url,
                     "headers": self.headers, "timeout_s": self.timeout_s}
        return ClusterRunner(cluster, transport, probe) if cluster else ProcessRunner(count, transport, probe)


class RecentMeasurements:
    """The last judged closed-loop measurement per (model, concurrency, protocol, batch size,
    window rules, server changes), so that a later check asking the same load point a different
    question may judge the same windows instead of measuring them again: PERF-2's points at
    PERF-1's concurrency and at CFG-2's saturation. A server restarted, a model reloaded or killed
    (`LoadEngine.server_changed`, the client's loads and unloads) forgets them."""

    def __init__(self) -> None:
        self._kept: dict[tuple, tuple[Measurement, float]] = {}

    def keep(self, key: tuple, measurement: Measurement) -> None:
        self._kept[key] = (measurement, time.monotonic())

    def clear(self) -> None:
        self._kept.clear()

    def holds(self, key: tuple) -> bool:
        return key in self._kept

    def judged_again(self, key: tuple, judged: Sequence[Rule], rules: MeasureRules | None = None) -> Measurement | None:
        """The kept measurement judged on `judged` (at the look level of `rules`, where given: the
        budget this look shares; else of the kept measurement's), where those rules are settled on
        its windows and nothing it judged failed for broken requests (a dead instance); else None."""
        kept = self._kept.get(key)
        if kept is None:
            return None
        earlier, ended = kept
        if dead_instances(earlier.stats.errors):
            return None
        judgements = judge_measurement(judged, earlier.windows, rules or earlier.rules, earlier.model)
        if not decided_enough(judgements, earlier.valid):
            return None
        return replace(earlier, judgements=judgements, rules=rules or earlier.rules,
                       reused_after_s=round(time.monotonic() - ended, 1))


def measurement_done(windows: list[Window], rules: MeasureRules, judged: Sequence[Rule] | None = None,
                     model: str | None = None, stop_on_dead_instance: bool = True) -> bool:
    """Whether a measurement stops after `windows`: at the window budget (`max_windows`), at a
    dead instance, at one of `rules.look_windows` once its `judged` rules are settled
    (rules.decided_enough), or without rules
    once its last windows are stable and valid (perf_analyzer's stop)."""
    if len(windows) >= rules.max_windows:
        return True
    if stop_on_dead_instance and windows and dead_instances(windows[-1].stats.errors):
        return True
    if judged is not None:
        if len(windows) not in rules.look_windows:
            return False
        valid = validity(*_span(windows), rules)[0]
        return decided_enough(judge_measurement(judged, windows, rules, model), valid)
    reported = windows[-rules.stability_windows:]
    return stability(windows, rules)[0] and validity(*_span(reported), rules)[0]


def _request_timeout(settings: Any) -> float | None:
    """load_request_timeout_s from the settings; None (no accounting) without settings that know it."""
    try:
        return float(settings.threshold("load_request_timeout_s").value) if settings is not None else None
    except (KeyError, AttributeError, TypeError):
        return None


def measurement_from(model: str, result: TrafficResult, rules: MeasureRules, concurrency: int | None,
                     rate: float | None, protocol: str, workers: int = 1,
                     judged: Sequence[Rule] | None = None) -> Measurement:
    """The Measurement of a run: the last `stability_windows` windows reported, or every window
    with each of the `judged` rules decided on them."""
    windows = result.windows
    count_reported = len(windows) if judged is not None else rules.stability_windows
    reported = windows[-count_reported:] if windows else []
    duration, count = _span(reported)
    stats = reported_stats(windows, result.recent_tallies, count_reported) or result.stats
    stable, stable_detail = stability(windows, rules)
    valid, valid_detail = validity(duration, count, rules)
    judgements = judge_measurement(judged, windows, rules, model) if judged is not None else []
    return Measurement(model, result.mode, concurrency, rate, stats, windows, stable, stable_detail, valid,
                       valid_detail, rules, combine_server([w.server for w in reported if w.server]), protocol,
                       workers, result, judgements=judgements, judged=judged is not None)


def reported_stats(windows: list[Window], recent_tallies: list[dict[str, Tally]], stability_windows: int) -> Stats | None:
    """The stats of the last `stability_windows` (the windows reported), merged from their tallies and divided by
    the duration of the same windows (fewer when fewer tallies were kept): requests and time always
    come from the same windows. None when no tally was kept."""
    n = min(stability_windows, len(recent_tallies), len(windows))
    if n <= 0:
        return None
    tallies = recent_tallies[-n:]
    duration, _ = _span(windows[-n:])
    return merged(t for by_model in tallies for t in by_model.values()).summary(duration)


def _span(windows: list[Window]) -> tuple[float, int]:
    return sum(w.end_s - w.start_s for w in windows), sum(w.stats.count_ok for w in windows)


def combine_server(windows: list[ServerWindow]) -> ServerWindow | None:
    """Several windows' server deltas as one: counts summed, per-request times weighted by count."""
    if not windows:
        return None
    combined = ServerWindow(errors=sorted({e for w in windows for e in w.errors}))
    if combined.mixed_servers:
        return combined  # any window may pair two servers' counters
    for model in {m for w in windows for m in w.models}:
        parts = [w.models[model] for w in windows if model in w.models]
        success = sum(p.success for p in parts)
        stage_us = {}
        for stage in parts[0].stage_us:
            weighted = [(p.stage_us[stage], p.success) for p in parts if p.stage_us.get(stage) is not None]
            weight = sum(n for _, n in weighted)
            stage_us[stage] = sum(v * n for v, n in weighted) / weight if weight else None
        inferences = sum(p.inference_count for p in parts)
        executions = sum(p.execution_count for p in parts)
        pending = [p.pending_requests for p in parts if p.pending_requests is not None]
        from_metrics = [p.metrics_average_batch_size for p in parts if p.metrics_average_batch_size is not None]
        combined.models[model] = ModelWindow(model, success, sum(p.fail for p in parts), inferences, executions,
                                             stage_us, inferences / executions if executions else None,
                                             max(pending) if pending else None,
                                             sum(from_metrics) / len(from_metrics) if from_metrics else None)
    utilization = [w.gpu_utilization for w in windows if w.gpu_utilization is not None]
    memory = [w.gpu_memory_used_fraction for w in windows if w.gpu_memory_used_fraction is not None]
    combined.gpu_utilization = sum(utilization) / len(utilization) if utilization else None
    combined.gpu_memory_used_fraction = max(memory) if memory else None
    return combined


def _rates(models: str | list[str] | Mapping[str, float], value: float | None) -> dict[str, float]:
    if isinstance(models, Mapping):
        return dict(models)
    if value is None:
        raise ValueError("give a rate/concurrency, or a {model: value} mapping")
    names = [models] if isinstance(models, str) else list(models)
    return {m: value for m in names}


def _positive(values: dict[str, float], what: str) -> dict[str, float]:
    if not values:
        raise ValueError(f"no model given to send {what} to")
    for model, value in values.items():
        if not value or value <= 0:
            raise ValueError(f"{what} for {model} must be positive, got {value!r}")
    return values
