"""Instance health across the whole run: every load phase (CFG-2, PERF-1, PERF-2, PERF-3) watches
its traffic for errors that mean a model instance died, probes every instance of every model in
scope when it ends, and keeps a run-wide record so that a later check on the same model says so.

Why: on Triton 2.51 a python backend stub that exits is never restarted, and `/v2/health/ready`
and `/v2/models/M/ready` keep answering 200. Triton keeps routing most traffic to the surviving
instances, so the error share can be tiny (3 in 12,000 requests) while half the capacity is gone
for the rest of the run. A success ratio cannot see that; one "Stub process '...' is not healthy."
can. So a dead instance fails the check in which it happened whatever the ratio, naming the
instance, when (seconds into the check, wall-clock time) and after how many requests.

    health = LoadHealth(triton, check, triton_facts)      # at the start of a load check
    for model in models:
        if health.skip(model):                            # still dead since an earlier check
            continue
        m = load.measure(model, ...)
        if health.observe(m, model=model, label="concurrency 8"):
            break                                         # an instance died: stop this model
    health.finish()                                       # probes, server log, record, recovery

Record (a `DeadInstances` fact per model in the run's facts): [{instance, check, test, label, t_s,
wall, requests, failed_requests, source, recovered, recovery_s}]. A launcher that owns the
server recovers the model (unload + load) and says it had to; on an attached server the instance
stays dead and every later check on the model fails on it.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from .facts import DeadInstances, Facts
from .load.errors import dead_instance, stub_exits_in_log, summarize_errors
from .load.stalls import find_stalls
from .server.models import instance_count, ready_models

if TYPE_CHECKING:
    from .record.recorder import CheckRecorder
    from .server.under_test import ServerUnderTest

LOG_LINES = 1_000_000  # the whole server log, for a run's length


@dataclass
class Death:
    """One model instance found dead, and where."""

    model: str
    instance: str
    check: str  # check id, e.g. PERF-1
    test: str  # the check function
    label: str  # the load point or step ("concurrency 4", "after the check")
    source: str  # errors | server log | probe
    t_s: float | None = None  # seconds into the check when the first request failed on it
    wall: float | None = None  # unix time of that failure
    requests: int | None = None  # requests completed in the check before it
    failed_requests: int = 0
    evidence: str = ""
    recovered: bool = False
    recovery_s: float | None = None

    def when(self) -> str:
        if self.t_s is None:
            return f"found {self.label}"
        stamp = datetime.fromtimestamp(self.wall, timezone.utc).strftime("%H:%M:%S") if self.wall else "?"
        text = f"first failed request {self.t_s:.1f} s into the check ({stamp} UTC), {self.label}"
        if self.requests is not None:
            text += f", after {self.requests} requests"
        return text

    def to_fact(self) -> dict[str, Any]:
        data = asdict(self)
        data.pop("evidence")
        return data


def wall_iso(wall: float | None) -> str | None:
    return datetime.fromtimestamp(wall, timezone.utc).isoformat(timespec="milliseconds") if wall else None


class LoadHealth:
    """The instance-health watch of one load check."""

    def __init__(self, target: ServerUnderTest, check: CheckRecorder, facts: Facts, models: Iterable[str] | None = None) -> None:
        self.target = target
        self.check = check
        self.facts = facts
        self.check_id = getattr(check.result, "check_id", "?")
        self.test = getattr(check.result, "nodeid", "?").split("::")[-1]
        self.started = time.monotonic()
        self.started_wall = time.time()
        self.requests_before = 0  # requests completed by the earlier traffic of this check
        self.deaths: dict[tuple[str, str], Death] = {}
        self.stalls = 0
        self.timed_out = 0
        self.skipped: dict[str, str] = {}  # model -> why it is not measured (still dead)
        self.models = list(models) if models is not None else None
        self.stall_ratio = check.threshold("load_stall_ratio").value
        self.stall_min_s = check.threshold("load_stall_min_s").value
        self.probe_span_s = check.threshold("health_probe_span_s").value
        self._log_mark = self._log_lines()
        self._earlier()

    # -- the run-wide record ------------------------------------------------------------------
    def recorded(self, model: str) -> list[dict[str, Any]]:
        """The dead instances of `model` earlier checks of this run recorded."""
        fact = self.facts.get(DeadInstances, model)
        return list(fact.deaths) if fact else []

    def _scope(self) -> list[str]:
        if self.models is None:
            try:
                self.models = ready_models(self.target)
            except Exception:
                self.models = []
        return self.models

    def _earlier(self) -> None:
        """What earlier checks found on the models in scope: said here, and a model whose instance
        is still dead is not measured (its numbers would describe a broken deployment)."""
        if not self.facts.of(DeadInstances):
            return
        for model in self._scope():
            entries = self.recorded(model)
            if not entries:
                continue
            where = "; ".join(f"{e['instance']} in {e['check']} ({e['test']})" for e in entries)
            if all(e.get("recovered") for e in entries):
                self.check.finding(f"{model}: an instance died in an earlier check ({where}) and the model was "
                                   "recovered by unload + load: the numbers here are the recovered model's",
                                   severity="warning", model=model)
                continue
            [(_, probe)] = self._probe_all([model])
            dead = probe.unhealthy_instances if probe is not None else []
            if dead:
                self.skipped[model] = (f"{model}: instance {', '.join(dead)} has been dead since an earlier check "
                                       f"({where}) and was not recovered (the server is not owned by this run); "
                                       "the model is not measured here")
                self.check.finding(self.skipped[model], model=model, rule="HEALTH")
                self.check.evidence(f"{model} probe at the start of the check", probe.describe())
            else:
                self.check.finding(f"{model}: an instance died in an earlier check ({where}); every instance "
                                   "answers again now", severity="warning", model=model)

    def skip(self, model: str) -> bool:
        """True when `model` has an instance still dead since an earlier check (already a finding)."""
        return model in self.skipped

    # -- watching traffic ---------------------------------------------------------------------
    def observe(self, result: Any, *, model: str | None = None, label: str = "") -> list[Death]:
        """Look at one run of traffic (a Measurement or a TrafficResult): dead instances from its
        errors (with the first failure's time and request count), stalled windows, requests that
        timed out. Returns the instances newly found dead (empty when all is well)."""
        traffic = getattr(result, "traffic", None) or result
        new: list[Death] = []
        base = getattr(traffic, "started_at", self.started) - self.started
        sightings = getattr(traffic, "sightings", None) or {}
        if not sightings and model is not None:  # no sightings kept: the errors only
            sightings = {model: {r: None for r in traffic.stats.errors}}
        for seen_model, reasons in sightings.items():
            for reason, seen in reasons.items():
                instance = dead_instance(reason)
                if not instance:
                    continue
                key = (seen_model, instance)
                count = seen.count if seen is not None else traffic.stats.errors.get(reason, 0)
                if key in self.deaths:
                    self.deaths[key].failed_requests += count
                    continue
                death = Death(seen_model, instance, self.check_id, self.test, label or "under load", "errors",
                              t_s=(base + seen.t_s) if seen is not None else None,
                              wall=seen.wall if seen is not None else None,
                              requests=(self.requests_before + seen.completed_before) if seen is not None else None,
                              failed_requests=count, evidence=reason)
                self.deaths[key] = death
                new.append(death)
        for stall in find_stalls(getattr(traffic, "windows", []) or [], self.stall_ratio, self.stall_min_s):
            self.stalls += 1
            where = f"{model}: " if model else ""
            self.check.finding(f"{where}stall at {label or 'the load'}: {stall.describe()} (below "
                               f"{self.stall_ratio:g} x, load_stall_ratio; at least {self.stall_min_s:g} s withheld, "
                               "load_stall_min_s)", model=model, rule="STALL")
        timed_out = int(getattr(traffic, "timed_out", 0) or 0)
        if timed_out:
            self.timed_out += timed_out
            where = f"{model}: " if model else ""
            self.check.finding(f"{where}{timed_out} requests at {label or 'the load'} got no answer within the "
                               "request timeout (load_request_timeout_s); counted as failed", model=model,
                               rule="TIMEOUT")
        self.requests_before += int(getattr(traffic, "completed", 0) or traffic.stats.count_ok + traffic.stats.count_errors)
        return new

    def observe_windows(self, windows: Iterable[Any], label: str = "the soak") -> list[Death]:
        """The soak's journal windows (index, start_s, end_s, wall_time, sent, errors): the first
        window in which each dead instance's error appears gives when and after how many requests."""
        new: list[Death] = []
        sent_before = 0
        for window in windows:
            for reason, count in (window.errors or {}).items():
                instance = dead_instance(reason)
                if not instance:
                    continue
                model = self._model_of(instance)
                key = (model, instance)
                if key in self.deaths:
                    self.deaths[key].failed_requests += count
                    continue
                start_wall = window.wall_time - (window.end_s - window.start_s)
                death = Death(model, instance, self.check_id, self.test, f"{label}, window {window.index}", "errors",
                              t_s=start_wall - self.started_wall, wall=start_wall,
                              requests=self.requests_before + sent_before, failed_requests=count, evidence=reason)
                self.deaths[key] = death
                new.append(death)
            sent_before += int(window.sent)
        self.requests_before += sent_before
        return new

    def _model_of(self, instance: str) -> str:
        names = sorted((m for m in self._scope() if instance.startswith(m + "_")), key=len, reverse=True)
        return names[0] if names else instance.rsplit("_", 2)[0]

    # -- at the end ---------------------------------------------------------------------------
    def finish(self) -> list[Death]:
        """Server log (when the run owns the server), a probe of every instance of every model in
        scope, findings for every dead instance, the run-wide record, recovery. Returns the deaths."""
        self._from_log()
        for model, probe in self._probe_all([m for m in self._scope() if m not in self.skipped]):
            if probe is None:
                continue
            self.check.evidence(f"{model} instance probe after the check", probe.describe())
            for instance in probe.unhealthy_instances:
                key = (model, instance)
                if key not in self.deaths:
                    self.deaths[key] = Death(model, instance, self.check_id, self.test, "by the probe after the check",
                                             "probe", evidence=probe.describe())
        for death in self.deaths.values():
            self._report(death)
        by_model: dict[str, list[Death]] = {}
        for death in self.deaths.values():
            by_model.setdefault(death.model, []).append(death)
        for model, deaths in by_model.items():
            self._recover(model, deaths)
            self.facts.publish(DeadInstances(model, tuple(self.recorded(model)) + tuple(d.to_fact() for d in deaths)))
        self.check.measure("dead model instances", len(self.deaths), "instances")
        return list(self.deaths.values())

    def _report(self, death: Death) -> None:
        self.check.finding(
            f"{death.model}: instance {death.instance} died during {death.check} ({death.when()}); "
            f"{_requests(death.failed_requests)} failed with \"Stub process '{death.instance}' is not healthy.\" "
            "Triton does not restart it and its ready endpoints keep answering 200",
            model=death.model, rule="HEALTH", value=death.instance)
        detail = {"instance": death.instance, "source": death.source, "seconds_into_check": death.t_s,
                  "wall_time": wall_iso(death.wall), "requests_before": death.requests,
                  "failed_requests": death.failed_requests, "load": death.label, "evidence": death.evidence}
        self.check.evidence(f"{death.model} dead instance {death.instance}", str(detail))

    def _from_log(self) -> None:
        if not getattr(self.target, "owns_process", False):
            return
        lines = self._log_text().splitlines()[self._log_mark:]
        for instance, line in stub_exits_in_log("\n".join(lines)):
            model = self._model_of(instance)
            key = (model, instance)
            if key in self.deaths:
                self.deaths[key].evidence += f"\nserver log: {line}"
            else:
                self.deaths[key] = Death(model, instance, self.check_id, self.test, "in the server log", "server log",
                                         evidence=f"server log: {line}")

    def _log_text(self) -> str:
        try:
            return self.target.server_log(LOG_LINES) or ""
        except Exception:
            return ""

    def _log_lines(self) -> int:
        if not getattr(self.target, "owns_process", False):
            return 0
        return len(self._log_text().splitlines())

    def _probe_all(self, models: list[str]) -> list[tuple[str, Any]]:
        """(model, InstanceProbe or None) for every model, probed at the same time: each probe is a
        span of real requests (`health_probe_span_s`), so one after another they cost that span
        per model. A probe that could not run leaves the rule unjudged (INCOMPLETE naming it
        unless the check failed on another rule)."""
        from concurrent.futures import ThreadPoolExecutor

        if not models:
            return []
        with ThreadPoolExecutor(len(models), thread_name_prefix="health-probe") as pool:
            done = list(zip(models, pool.map(self._probe, models), strict=True))
        probes = []
        for model, (probe, error) in done:
            if error is not None:
                self.check.measure("every instance answers the instance probe", None, model=model, threshold=True,
                                   comparison="==")
                self.check.evidence(f"{model}: the instance probe could not run", error)
            probes.append((model, probe))
        return probes

    def _probe(self, model: str) -> tuple[Any, str | None]:
        """(one InstanceProber round on `model`, None) or (None, why it could not run); (None,
        None) for models a plain request cannot probe: sequence and decoupled models."""
        from .faults.probes import InstanceProber

        try:
            config = self.target.client.model_config(model)
        except Exception:
            return None, None
        if "sequence_batching" in config or (config.get("model_transaction_policy") or {}).get("decoupled"):
            return None, None
        prober = None
        try:
            prober = InstanceProber(self._new_client, model, instance_count(config), self.probe_span_s)
            return prober.probe(), None
        except Exception as exc:
            return None, f"{type(exc).__name__}: {exc}"
        finally:
            if prober is not None:
                prober.close()

    def _new_client(self) -> Any:
        from .server.client import TritonClient

        endpoints = self.target.endpoints
        settings = self.target.settings
        return TritonClient(endpoints.http_url, endpoints.grpc_url, settings.headers, 5.0,
                            settings.triton_dynamic_dim, settings.input_shapes,
                            declared=settings.input_declarations())

    def _recover(self, model: str, deaths: list[Death]) -> None:
        """Unload + load the model when the run owns the server, until every instance answers."""
        names = ", ".join(d.instance for d in deaths)
        if not getattr(self.target, "owns_process", False):
            self.check.recommend(f"{model}: unload and load the model to bring {names} back (Triton 2.51 does not "
                                 "restart a dead python stub); find why the stub exited in the server log.")
            return
        client = self.target.client
        limit = self.check.threshold("instance_recovery_max_s").value
        started = time.monotonic()
        problem = None
        try:
            client.unload(model)
            _wait(lambda: not client.model_ready(model), 10.0)
            client.load(model)
            probe = None
            while time.monotonic() - started < limit:
                probe, _ = self._probe(model)
                if probe is not None and probe.every_instance_answers:
                    break
            else:
                problem = f"not every instance answered within {limit:g} s: {probe.describe() if probe else '?'}"
        except Exception as exc:
            problem = f"{type(exc).__name__}: {exc}"
        recovery_s = time.monotonic() - started
        if problem:
            self.check.finding(f"{model}: recovery of {names} by unload + load failed: {problem}", model=model,
                               rule="HEALTH")
            return
        for death in deaths:
            death.recovered, death.recovery_s = True, round(recovery_s, 3)
        self.check.finding(f"{model}: {names} had to be recovered by unload + load (this run owns the server); "
                           f"every instance answered again {recovery_s:.1f} s later", severity="warning", model=model)
        self.check.evidence(f"{model} recovery", f"unload + load of {model} after {names} died; every instance "
                                                 f"answered a probe {recovery_s:.2f} s after the unload")
        self.check.recommend(f"{model}: a python stub exited under load; find why in the server log, and "
                             "watch for 'Stub process ... is not healthy' in production (Triton 2.51 neither restarts "
                             "the stub nor reports it on the ready endpoints).")


def _requests(n: int) -> str:
    return f"{n} request{'' if n == 1 else 's'}"


def _wait(condition: Any, timeout_s: float, interval_s: float = 0.1) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if condition():
                return True
        except Exception:
            pass
        time.sleep(interval_s)
    return False


def errors_evidence(errors: dict[str, int]) -> dict[str, Any]:
    """Errors sorted by kind (for evidence): see load/errors.py."""
    return summarize_errors(errors).to_dict()
