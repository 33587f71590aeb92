"""FaultInjector: breaks the server under test on purpose, under open-loop traffic, and brings it
back. What the `faults` fixture hands a check.

Low-level faults: `kill_stub`, `kill_server` + `start_server`, `terminate_server` (SIGTERM),
`reload` (a config override: a real reload), `unload_and_load`. Experiments (steady state, fault,
recovery, timeline): `forced_reload`, `version_rollout`, `instance_restart`, `server_restart`,
`graceful_shutdown`. Every destructive experiment leaves the server ready, every instance
answering, before it returns (`restore`), so the checks after it measure a healthy server.

On a decoupled (streaming) model the traffic is streamed and the probes are streamed requests
(faults/stream_traffic.py): a forced reload, a rollout and a crash + restart run the same way on it.
"""

from __future__ import annotations

import copy
import signal
import time
from collections.abc import Callable
from contextlib import ExitStack
from typing import Any

from ..client import http_status
from ..load.streaming_single import stream_once
from ..models import initial_state_of, instance_count, is_decoupled
from .experiment import Experiment, one_line, run_experiment
from .outcomes import (
    NOTHING_IN_FLIGHT,
    InstanceRestartOutcome,
    Outcome,
    ReloadOutcome,
    ServerRestartOutcome,
    ShutdownOutcome,
)
from .plan import FaultPlan
from .probes import InstanceProber, Watcher, wait_until
from .processes import ServerProcesses, StubProcess, still_running
from .scratch import ScratchUnsupported, add_version, numeric_versions, scratch_server
from .timeline import event_time, failed_between, peak_p99_ms, recovered_at, steady_state

RELOAD_MARKER = "triton_ready_reload"
# fault kind -> the experiment that runs the action declared in attach.fault_actions; filled by
# faults/declared_experiments.py (its experiments extend the ones here), which faults/__init__ imports.
DECLARED: dict[str, type] = {}


def with_reload_marker(config: dict[str, Any]) -> dict[str, Any]:
    """The effective config with one harmless change (a model parameter no backend reads), so that
    a load with it is a real reload; a load of an unchanged model is a no-op."""
    changed = copy.deepcopy(config)
    parameters = changed.get("parameters") or {}
    parameters[RELOAD_MARKER] = {"string_value": f"{time.time():.6f}"}
    changed["parameters"] = parameters
    return changed


class FaultInjector:
    """Fault injection against one Target, with traffic from one LoadEngine."""

    def __init__(self, target: Any, engine: Any, plan: FaultPlan, success_rate_min: float = 0.999) -> None:
        self.target = target
        self.engine = engine
        self.plan = plan
        self.success_rate_min = success_rate_min
        self.processes = ServerProcesses(target.launcher)

    # -- what can be done here -----------------------------------------------------------------
    @property
    def owns_process(self) -> bool:
        """True when the run started the server and may kill, restart and signal it."""
        return bool(self.target.owns_process)

    @property
    def policy(self):
        """What this run may do to the server (`pytest_triton_ready.plan.Policy`)."""
        if getattr(self, "_policy", None) is None:
            from ..plan import policy

            self._policy = policy(self.target.settings)
        return self._policy

    def declared(self, kind: str):
        """The declared fault action of `kind` (attach.fault_actions) on an attached server, or None."""
        return None if self.owns_process else self.policy.declared(kind)

    def destructive_unavailable(self, kind: str | None = None) -> str | None:
        """Why a destructive experiment (of `kind`: server_crash, sigterm, instance_kill, new_version)
        cannot run here, or None when it can: on a server this run owns always; on an attached one
        with a declared fault action for it and `faults` allowed."""
        if self.owns_process:
            return None
        declared = self.declared(kind) if kind else None
        if declared is None:
            how = (f"declare how to cause it in attach.fault_actions.{kind} (docs/faults.md), or use a launcher "
                   "that owns it (--triton-launch=embedded or container)" if kind else
                   "killing instances or the server needs a launcher that owns it (--triton-launch=embedded "
                   "or container) or a declared fault action (attach.fault_actions)")
            return f"the server is attached ({self.target.endpoints.http_url}), not owned by this run: {how}"
        from ..plan import FAULT_CHECK

        return self.policy.refusal("faults", f"the {FAULT_CHECK[kind]} experiment runs attach.fault_actions.{kind} "
                                             f"(`{declared.action.shown()}`)")

    @property
    def client(self):
        return self.target.client

    def choose_model(self) -> str | None:
        """The model the experiments break: `faults.model`, else the first READY stateless model
        in scope, python backend and most instances first (a stub can be killed, one instance of
        several can fail), a top-level model before a step of an ensemble or BLS pipeline (whose
        fault would break the pipelines too)."""
        ready = {e["name"] for e in self.client.repository_index() if e.get("state") == "READY"}
        if self.plan.model:
            return self.plan.model if self.plan.model in ready else None
        steps = self.pipeline_steps()
        candidates = []
        for model in self.target.models():
            if model not in ready:
                continue
            config = self.client.model_config(model)
            if "sequence_batching" in config or (config.get("model_transaction_policy") or {}).get("decoupled"):
                continue
            candidates.append((config.get("backend") != "python", model in steps, -instance_count(config), model))
        return min(candidates)[-1] if candidates else None

    def pipeline_steps(self) -> dict[str, list[str]]:
        """Each READY model in scope that is a step of an ensemble or BLS model in scope -> those pipelines."""
        from ..pipelines import composing_models

        ready = {e["name"] for e in self.client.repository_index() if e.get("state") == "READY"}
        bls = getattr(self.target.settings, "bls_composing", {}) or {}
        through: dict[str, list[str]] = {}
        for model in (m for m in self.target.models() if m in ready):
            for step in composing_models(model, self.client.model_config, bls):
                through.setdefault(step, []).append(model)
        return through

    def choose_streaming_model(self) -> str | None:
        """The decoupled model the experiments break where no stateless unary model is in scope:
        `faults.model` when it is a READY decoupled one, else the first READY decoupled model in
        scope, python backend and most instances first."""
        ready = {e["name"] for e in self.client.repository_index() if e.get("state") == "READY"}
        if self.plan.model:
            return self.plan.model if self.plan.model in ready and self.is_streaming(self.plan.model) else None
        candidates = []
        for model in self.target.models():
            if model in ready and self.is_streaming(model):
                config = self.client.model_config(model)
                candidates.append((config.get("backend") != "python", -instance_count(config), model))
        return min(candidates)[2] if candidates else None

    def is_streaming(self, model: str) -> bool:
        """True for a decoupled model: it answers over gRPC streams only."""
        return is_decoupled(self.client.model_config(model))

    def streaming_plan(self, model: str, client: Any = None):
        from .stream_traffic import streaming_plan

        return streaming_plan(client or self.client, model)

    def new_client(self, http_url: str | None = None, grpc_url: str | None = None, timeout_s: float = 5.0):
        from ..client import TritonClient

        endpoints = self.target.endpoints
        settings = self.target.settings
        return TritonClient(http_url or endpoints.http_url, grpc_url or endpoints.grpc_url, settings.headers,
                            timeout_s, settings.triton_dynamic_dim, settings.input_shapes,
                            declared=settings.input_declarations())

    def prober(self, model: str, client_factory: Callable[[], Any] | None = None, client: Any = None) -> InstanceProber:
        """Real requests over every instance of `model`: unary, or streamed for a decoupled model."""
        config = (client or self.client).model_config(model, fresh=True)
        if is_decoupled(config):
            from .stream_traffic import StreamingProber

            return StreamingProber(self.target.endpoints.grpc_url, self.streaming_plan(model, client),
                                   instance_count(config), self.plan.probe_span_s, self.target.settings.headers)
        return InstanceProber(client_factory or self.new_client, model, instance_count(config), self.plan.probe_span_s)

    def answers_once(self, model: str, client: Any, version: str | None = None, grpc_url: str | None = None,
                     plan: Any = None) -> bool:
        """One request to `model` (that `version` of it) answered: with a StreamingPlan (a decoupled
        model) a streamed request over `grpc_url` (default the server's), else a unary one through
        `client`. Safe from any thread when `client` belongs to it: nothing else is asked."""
        if plan is not None:
            from .stream_traffic import PROBE_TEXT, PROBE_TOKENS

            answer = stream_once(grpc_url or self.target.endpoints.grpc_url, plan, PROBE_TEXT, PROBE_TOKENS,
                                 timeout_s=5.0, headers=self.target.settings.headers, version=version)
            return answer.final and answer.error is None
        return client.infer(model, version=version).ok

    def every_instance_answers(self, prober: InstanceProber, traffic: Any = None) -> bool:
        """One probe of every instance answered correctly, and the traffic (when given) had no
        error meanwhile."""
        since = traffic.elapsed_s() if traffic is not None else None
        if not prober.probe().every_instance_answers:
            return False
        if traffic is None:
            return True
        bins, _ = traffic.timeline_so_far()
        return not any(b.errors for b in bins if b.t_s >= since)

    # -- low-level faults ------------------------------------------------------------------------
    def stubs(self, model: str) -> list[StubProcess]:
        """The live python backend stubs serving `model`'s instances."""
        return self.processes.stubs(model)

    def kill_stub(self, model: str, instance: str | None = None) -> StubProcess:
        """SIGKILL the stub of one instance of `model` (the first one, or `instance`)."""
        stubs = [s for s in self.stubs(model) if instance is None or s.instance == instance]
        if not stubs:
            raise LookupError(f"no python backend stub of {model}" + (f" instance {instance}" if instance else ""))
        self.processes.signal(stubs[0].pid, signal.SIGKILL)
        return stubs[0]

    def reload(self, model: str, config: dict[str, Any] | None = None, client: Any = None) -> dict[str, Any]:
        """A real reload of `model`: a load with its effective config plus a harmless change (or
        `config`), through `client` (default: the run's). Returns the config it loaded."""
        client = client or self.client
        config = config or with_reload_marker(client.model_config(model, fresh=True))
        client.load(model, config=config)
        return config

    def unload_and_load(self, model: str) -> None:
        """What recovers a model whose instance died on Triton up to 25.11: unload, then load."""
        self.client.unload(model)
        wait_until(lambda: not self.client.model_ready(model), 10)
        self.client.load(model)

    def kill_server(self) -> None:
        """SIGKILL the server and everything it started (a crash), through its launcher."""
        self.target.launcher.kill()

    def start_server(self) -> None:
        """Start the server again on the same ports, through its launcher."""
        self.target.launcher.start()

    def terminate_server(self) -> None:
        """SIGTERM the server process, as an orchestrator does to stop it."""
        self.processes.terminate_server()

    # -- bringing it back ------------------------------------------------------------------------
    def restore(self, model: str | None) -> str | None:
        """Make sure the server is up, ready, and every instance of `model` answers: start it when
        it is gone, unload + load the model when an instance is dead. None, or why it failed."""
        timeout = self.plan.recovery_timeout_s
        launcher = self.target.launcher
        if self.owns_process and self.processes.exit_code() is not None:
            try:
                launcher.stop()
                launcher.start()
            except Exception as exc:
                return f"the server could not be started again: {exc}"
        initial = initial_state_of(self.target)  # a server ready 400 from the start is restored when back as it was
        if wait_until(lambda: initial.restored(self.client), timeout, 0.2) is None:
            return f"the server was not ready again within {timeout:.0f} s" + (
                "" if initial.ready else " (as it was at the start: live, with the same models READY)")
        if model is None:
            return None
        prober = self.prober(model)
        try:
            if not self.every_instance_answers(prober):
                self.unload_and_load(model)
                if wait_until(lambda: self.every_instance_answers(prober), timeout, 0.2) is None:
                    return f"{model}: not every instance answered again within {timeout:.0f} s"
        finally:
            prober.close()
        return None

    # -- traffic ---------------------------------------------------------------------------------
    def _traffic(self, model: str, engine: Any = None, grpc_url: str | None = None, client: Any = None):
        """Open-loop traffic at `faults.rate_per_s`: streamed for a decoupled model (over
        `grpc_url`, default the server's), else the load engine's (`engine`, default the run's)."""
        plan = self.plan
        if self.is_streaming(model):
            from .stream_traffic import StreamingTraffic

            return StreamingTraffic(grpc_url or self.target.endpoints.grpc_url, self.streaming_plan(model, client),
                                    plan.rate_per_s, headers=self.target.settings.headers, late_drop_s=plan.late_drop_s)
        return (engine or self.engine).open_loop(model, rate=plan.rate_per_s, protocol=plan.protocol,
                                                 late_drop_s=plan.late_drop_s)

    def _steady(self, outcome: Outcome, until_s: float | None) -> None:
        if outcome.traffic is None or until_s is None:
            return
        outcome.steady = steady_state(outcome.bins, 0.0, until_s, self.success_rate_min)
        if not outcome.steady.holds and outcome.incomplete is None:
            outcome.incomplete = f"no steady state before the fault: {outcome.steady.reason}"

    def _read_reload(self, outcome: ReloadOutcome, event: str) -> None:
        fault_at = event_time(outcome.events, event)
        self._steady(outcome, fault_at)
        if fault_at is None:
            return
        bins = outcome.bins
        outcome.failed_requests = failed_between(bins, fault_at)
        outcome.baseline_p99_ms = outcome.steady.p99_ms if outcome.steady else None
        outcome.peak_p99_ms = peak_p99_ms(bins, fault_at)

    # -- experiments: each one through the one skeleton (experiment.run_experiment) ----------------
    def run(self, experiment: Experiment) -> Outcome:
        """Run any Experiment through the skeleton: steady state, fault, verdict, restore (finally)."""
        return run_experiment(experiment)

    def forced_reload(self, model: str) -> ReloadOutcome:
        """Under traffic, reload `model` with a harmless config change (a real reload). Zero
        downtime means no failed request; `serve_s` runs until the reloaded config answers. The
        model's own configuration is loaded back afterwards, even when the reload request timed out."""
        return self.run(ForcedReload(self, model))

    def _pick(self, kind: str, built_in: type, model: str) -> Outcome:
        """The built-in experiment, or on an attached server the one that runs the declared action."""
        if self.declared(kind) is not None:
            return self.run(DECLARED[kind](self, model, self.declared(kind)))
        return self.run(built_in(self, model))

    def version_rollout(self, model: str) -> ReloadOutcome:
        """Roll out version N+1 of `model` under traffic, on a scratch copy of its repository
        served by a second server like the run's one: the version appears on disk, a load picks it
        up, and traffic without a version must keep flowing while N+1 replaces N."""
        return self._pick("new_version", VersionRollout, model)

    def instance_restart(self, model: str) -> InstanceRestartOutcome:
        """Kill one instance of `model` (its python backend stub) under traffic. Watch what clients
        see and what the ready endpoints say, then recover with unload + load and time until every
        instance answers again."""
        return self._pick("instance_kill", InstanceRestart, model)

    def server_restart(self, model: str) -> ServerRestartOutcome:
        """SIGKILL the server under traffic and start it again through its launcher: time to live,
        to ready, to the first correct inference (the same answer as before the crash), and no
        process of the old server left behind."""
        return self._pick("server_crash", ServerRestart, model)

    def graceful_shutdown(self, model: str) -> ShutdownOutcome:
        """SIGTERM the server under traffic: requests in flight must complete, new ones be refused
        cleanly (connection refused, or an answer that the model is unavailable), readiness must
        drop before the process exits, and the exit must come within the exit timeout. Then the
        server is started again for the checks after this one."""
        return self._pick("sigterm", GracefulShutdown, model)

    @staticmethod
    def errors_after(outcome: Outcome, t_s: float | None) -> dict[str, int]:
        """Errors by reason after the fault: the traffic's reasons, when no error came before it."""
        errors = outcome.errors_by_reason
        if t_s is None or failed_between(outcome.bins, 0.0, t_s) == 0:
            return errors
        outcome.notes.append("errors before the fault are counted with those after it")
        return errors


class _InjectorExperiment(Experiment):
    """An experiment on the injector's server: its plan, its traffic, and by default the full
    restore (server up and ready, every instance of the model answering)."""

    destructive = True
    kind: str | None = None  # the fault kind a declared action can stand in for (attach.fault_actions)

    def __init__(self, injector: FaultInjector, model: str) -> None:
        super().__init__(model, injector.plan, injector.success_rate_min)
        self.injector = injector

    def unavailable(self) -> str | None:
        return self.injector.destructive_unavailable(self.kind) if self.destructive else None

    def open_traffic(self) -> Any:
        return self.injector._traffic(self.model)

    def restore(self) -> str | None:
        return self.injector.restore(self.model)

    def restore_advice(self) -> str:
        return (f"the server may be down, not ready, or serving {self.model} with a dead instance: restart it "
                f"(or unload + load {self.model}) and check /v2/health/ready and one inference on every instance "
                "before trusting the checks after this one")


class ForcedReload(_InjectorExperiment):
    name = "forced reload"
    outcome_type = ReloadOutcome
    destructive = False
    EVENT = "reload requested"
    refused = False  # the server answered the reload request with an error: nothing changed

    def unavailable(self) -> str | None:
        return self.injector.policy.refusal("reload", f"the forced reload reloads {self.model} with a config "
                                                      "override under traffic, then its own config")

    def prepare(self) -> None:
        outcome = self.outcome
        client = self.injector.client
        try:
            self.original = client.model_config(self.model, fresh=True)
        except Exception as exc:
            outcome.incomplete = (f"the server did not give {self.model}'s configuration to reload it with: "
                                  f"{one_line(exc)}")
            return
        self.changed = with_reload_marker(self.original)
        self.prober = self.injector.prober(self.model)

    def fault(self, traffic: Any) -> None:
        outcome, model, client = self.outcome, self.model, self.injector.client
        marker = self.changed["parameters"][RELOAD_MARKER]
        prober = self.prober
        self.note_fault(traffic, self.EVENT)
        started = time.monotonic()
        try:
            self.injector.reload(model, self.changed)
        except Exception as exc:
            outcome.incomplete = f"the server refused the reload: {one_line(exc)}"
            # An error the server answered changed nothing; a timeout or a lost connection leaves
            # the reload possibly carried out (or still running): then the restore must run.
            self.refused = _server_answered(exc)
            return
        outcome.reload_call_s = time.monotonic() - started
        traffic.event("reload returned")
        serving = wait_until(
            lambda: (client.model_config(model, fresh=True).get("parameters") or {}).get(RELOAD_MARKER) == marker
            and prober.answers(), self.plan.recovery_timeout_s)
        if serving is not None:
            outcome.serve_s = time.monotonic() - started
            traffic.event("reloaded model serves")

    def release(self) -> None:
        if getattr(self, "prober", None) is not None:
            self.prober.close()

    def verdict(self) -> None:
        self.injector._read_reload(self.outcome, self.EVENT)

    def restore(self) -> str | None:
        """Put the configuration the model had back (another real reload, outside traffic) whenever
        the reload was requested, even if the request failed or timed out: the server may have
        carried it out all the same. A reload still running is waited for first."""
        if not self.fault_attempted or self.refused:
            return None
        timeout = self.plan.recovery_timeout_s
        client = self.injector.new_client(timeout_s=timeout)  # a load may take longer than one request's timeout
        try:
            wait_until(lambda: all(e.get("state") not in ("LOADING", "UNLOADING")
                                   for e in client.repository_index() if e.get("name") == self.model), timeout, 0.2)
            self.injector.reload(self.model, self.original, client=client)
        except Exception as exc:
            return f"the original configuration could not be loaded back: {one_line(exc)}"
        finally:
            client.close()
        return None

    def restore_advice(self) -> str:
        return (f"{self.model} may still run with the experiment's configuration (model parameter {RELOAD_MARKER}) "
                f"instead of its own: load it again with its own configuration (POST "
                f"/v2/repository/models/{self.model}/load without a config, after touching its config.pbtxt) or "
                "restart the server")


class VersionRollout(_InjectorExperiment):
    name = "new version rollout"
    outcome_type = ReloadOutcome
    kind = "new_version"

    def prepare(self) -> None:
        from ..load import LoadEngine

        self.stack = ExitStack()
        try:
            server, self.model_dir = self.stack.enter_context(scratch_server(self.injector.target.launcher, self.model))
        except ScratchUnsupported as exc:
            self.outcome.incomplete = str(exc)
            return
        self.endpoints = endpoints = server.endpoints
        self.client = self.injector.new_client(endpoints.http_url, endpoints.grpc_url, timeout_s=10.0)
        self.stack.callback(self.client.close)
        self.engine = LoadEngine(self.client, endpoints.grpc_url, endpoints.http_url,
                                 self.injector.target.settings.headers)
        outcome = self.outcome
        versions = numeric_versions(self.model_dir)
        self.old, self.new = versions[-1], versions[-1] + 1
        outcome.old_version, outcome.new_version = str(self.old), str(self.new)
        config = self.client.model_config(self.model, fresh=True)
        self.override = None
        if "specific" in (config.get("version_policy") or {}):
            self.override = copy.deepcopy(config)
            self.override["version_policy"] = {"specific": {"versions": [self.new]}}
            outcome.notes.append(f"the version policy is `specific`: version {self.new} was named in a config override")

    def open_traffic(self) -> Any:
        return self.injector._traffic(self.model, self.engine, self.endpoints.grpc_url, self.client)

    @property
    def event(self) -> str:
        return f"version {self.new} added, load requested"

    def fault(self, traffic: Any) -> None:
        outcome, model, new, endpoints = self.outcome, self.model, self.new, self.endpoints
        own: dict[str, Any] = {}  # the watcher's thread gets its own client: one HTTP client per thread
        plan = self.injector.streaming_plan(model, self.client) if self.injector.is_streaming(model) else None

        def new_version_serves() -> bool:
            if "client" not in own:
                own["client"] = self.injector.new_client(endpoints.http_url, endpoints.grpc_url)
            return own["client"].model_ready(model, str(new)) and self.injector.answers_once(
                model, own["client"], str(new), endpoints.grpc_url, plan)

        watcher = Watcher({"new version serves": new_version_serves}, interval_s=0.05)
        self.fault_attempted = True
        if not self.place_new_version():
            return
        self.note_fault(traffic, self.event)
        watcher.on_first = traffic.event
        watcher.start()
        started = time.monotonic()
        try:
            self.client.load(model, config=self.override)
        except Exception as exc:
            outcome.incomplete = f"the server refused to load version {new}: {one_line(exc)}"
        else:
            outcome.reload_call_s = time.monotonic() - started
            traffic.event("load returned")
            if watcher.wait(self.plan.recovery_timeout_s):
                outcome.serve_s = watcher.first["new version serves"] + (watcher.started - started)
        watcher.stop()
        if "client" in own:
            own["client"].close()

    def place_new_version(self) -> bool:
        """Version N+1 appears in the repository; False when it could not be placed."""
        add_version(self.model_dir, self.old, self.new)
        return True

    def verdict(self) -> None:
        outcome = self.outcome
        states = {e.get("version"): e.get("state") for e in self.client.repository_index()
                  if e.get("name") == self.model}
        outcome.old_version_state = states.get(str(self.old))
        self.injector._read_reload(outcome, self.event)

    def restore(self) -> str | None:
        """The run's own server was never touched: stop the scratch server, remove its copy."""
        try:
            self.stack.close()
        except Exception as exc:
            return f"the scratch server could not be stopped: {one_line(exc)}"
        return None

    def restore_advice(self) -> str:
        return ("the run's own server was not touched, but a scratch tritonserver (triton-ready-scratch-*) may "
                "still run on this host: end it")


class InstanceRestart(_InjectorExperiment):
    name = "instance restart"
    outcome_type = InstanceRestartOutcome
    kind = "instance_kill"

    def unavailable(self) -> str | None:
        reason = super().unavailable()
        if reason is None and self.injector.owns_process and not self.injector.stubs(self.model):
            reason = (f"{self.model} has no python backend stub process this run can see: an instance of another "
                      "backend lives inside the server process and cannot be killed alone")
        return reason

    def prepare(self) -> None:
        self.prober = self.injector.prober(self.model)
        self.outcome.instances = self.prober.instances
        self.prober.take_reference()

    @property
    def event(self) -> str:
        return f"stub {self.outcome.instance} killed"

    def fault(self, traffic: Any) -> None:
        injector, outcome, model, plan = self.injector, self.outcome, self.model, self.plan
        client, prober = injector.client, self.prober
        self.fault_attempted = True
        outcome.instance = self.cause()
        if outcome.instance is None:
            return
        self.note_fault(traffic, self.event)
        observe_until = time.monotonic() + plan.observe_s
        while time.monotonic() < observe_until:
            outcome.server_ready_while_dead.append(client.get_status("/v2/health/ready"))
            outcome.model_ready_while_dead.append(client.get_status(f"/v2/models/{model}/ready"))
            time.sleep(0.1)
        probe = prober.probe()
        outcome.probe_while_dead = probe.describe()
        outcome.unhealthy_instances = probe.unhealthy_instances
        self.after_kill()
        self.mark(traffic, "recovery: unload + load")
        started = time.monotonic()
        injector.unload_and_load(model)
        traffic.event("load returned")
        while time.monotonic() - started < plan.recovery_timeout_s:
            round_started = time.monotonic()
            if injector.every_instance_answers(prober, traffic):
                outcome.recovery_s = round_started - started
                traffic.event("every instance answered a probe")
                break
            time.sleep(0.1)

    def cause(self) -> str | None:
        """Kill one instance; its name (None: no fault was caused)."""
        return self.injector.kill_stub(self.model).instance

    def after_kill(self) -> None:
        """What the server did about the dead instance by itself, and whether a plain load helps."""
        injector, outcome, model = self.injector, self.outcome, self.model
        outcome.restarted_by_server = any(s.instance == outcome.instance for s in injector.stubs(model))
        injector.client.load(model)  # a plain load of an unchanged model: a no-op, no new stub
        outcome.plain_load_recovered = any(s.instance == outcome.instance for s in injector.stubs(model))

    def release(self) -> None:
        self.prober.close()

    def exercised(self) -> str | None:
        if self.outcome.instance is None or self.outcome.death_observed:
            return None
        return (f"no death was observed: after the kill of {self.outcome.instance} no request failed and the probe of "
                f"every instance answered ({self.outcome.probe_while_dead}); the kill did not take, so the ready "
                "endpoints were not judged against a dead instance")

    def verdict(self) -> None:
        outcome, plan = self.outcome, self.plan
        killed_at = event_time(outcome.events, self.event)
        self.injector._steady(outcome, killed_at)
        recovery_at = event_time(outcome.events, "recovery: unload + load")
        if killed_at is None:
            return
        bins = outcome.bins
        outcome.failed_requests = failed_between(bins, killed_at)
        outcome.failed_while_dead = failed_between(bins, killed_at, recovery_at)
        outcome.failed_during_recovery = failed_between(bins, recovery_at) if recovery_at is not None else 0
        dead = [b for b in bins if killed_at <= b.t_s < (recovery_at or killed_at)]
        answered = sum(b.ok + b.errors for b in dead)
        outcome.failure_share = sum(b.errors for b in dead) / answered if answered else None
        back = recovered_at(bins, recovery_at or killed_at, plan.recovered_hold_s)
        outcome.impact_s = back - killed_at if back is not None else None


class ServerRestart(_InjectorExperiment):
    name = "server restart"
    outcome_type = ServerRestartOutcome
    kind = "server_crash"

    def prepare(self) -> None:
        injector = self.injector
        self.prober = injector.prober(self.model)
        self.prober.take_reference()
        self.probe_client = injector.new_client(timeout_s=2.0)
        self.before = injector.processes.tree()
        self.starter_error: list[BaseException] = []

    def _correct_inference(self) -> bool:
        """The same answer to the same input as before the crash."""
        return self.prober.reference is not None and self.prober.answers(self.probe_client, protocol=None)

    def fault(self, traffic: Any) -> None:
        injector, outcome, plan = self.injector, self.outcome, self.plan
        http = injector.target.endpoints.http_url
        self.note_fault(traffic, "SIGKILL")
        killed = time.monotonic()
        if not self.cause():
            return
        outcome.kill_s = time.monotonic() - killed
        outcome.left_behind = still_running(self.before) if self.before else None
        ready_path = _readiness_path(injector.target, self.model)
        watcher = Watcher({"live": lambda: http_status(f"{http}/v2/health/live", 1.0) == 200,
                           "ready": lambda: http_status(f"{http}{ready_path}", 1.0) == 200,
                           "first correct inference": self._correct_inference}, on_first=traffic.event)
        traffic.event("restart")
        watcher.start()
        _catching(self.bring_back, self.starter_error)()
        watcher.wait(plan.recovery_timeout_s)
        watcher.stop()
        offset = watcher.started - killed
        outcome.live_s, outcome.ready_s, outcome.first_inference_s = (
            watcher.first[name] + offset if name in watcher.first else None
            for name in ("live", "ready", "first correct inference"))
        # The traffic's own channel may come back later than the server (reconnect backoff).
        since = traffic.elapsed_s()
        wait_until(lambda: any(b.ok for b in traffic.timeline_so_far()[0] if b.t_s >= since),
                   plan.recovery_timeout_s, 0.1)

    def cause(self) -> bool:
        """Crash the server; False when no fault was caused."""
        self.injector.kill_server()
        return True

    def bring_back(self) -> None:
        """Start the crashed server again (the launcher's start)."""
        self.injector.start_server()

    def release(self) -> None:
        try:
            self.prober.close()
        finally:
            self.probe_client.close()

    def verdict(self) -> None:
        outcome = self.outcome
        if self.starter_error:
            outcome.notes.append(f"the launcher could not start the server again: {one_line(self.starter_error[0])}")
        killed_at = event_time(outcome.events, "SIGKILL")
        self.injector._steady(outcome, killed_at)
        if killed_at is not None:
            outcome.failed_requests = failed_between(outcome.bins, killed_at)
            back = recovered_at(outcome.bins, killed_at, self.plan.recovered_hold_s)
            outcome.client_recovery_s = back - killed_at if back is not None else None


class GracefulShutdown(_InjectorExperiment):
    name = "graceful shutdown"
    outcome_type = ShutdownOutcome
    kind = "sigterm"

    def prepare(self) -> None:
        injector = self.injector
        self.outcome.exit_timeout_s = float(injector.target.launcher.exit_timeout_s)
        # Idle keep-alive connections of this run's own client would hold the server until its
        # exit timeout; a drained load balancer holds none either.
        injector.client.reconnect()
        self.before = injector.processes.tree()

    @property
    def settle_s(self) -> float:
        return min(self.plan.settle_s, 0.5)

    def ready_for_fault(self, traffic: Any) -> str | None:
        return None if traffic.in_flight else "no request was in flight"

    def fault(self, traffic: Any) -> None:
        injector, outcome = self.injector, self.outcome
        outcome.in_flight_at_sigterm = traffic.in_flight  # first: the request in flight may end any moment
        http = injector.target.endpoints.http_url
        ready_path = _readiness_path(injector.target, self.model)
        watcher = Watcher({"readiness dropped": lambda: http_status(f"{http}{ready_path}", 1.0) != 200,
                           "exited": self.exited}, on_first=traffic.event)
        self.note_fault(traffic, "SIGTERM")
        if not self.cause():
            return
        watcher.start()
        watcher.wait(outcome.exit_timeout_s + 10)
        watcher.stop()
        outcome.ready_drop_s = watcher.first.get("readiness dropped")
        outcome.exit_s = watcher.first.get("exited")
        outcome.exit_code = self.read_exit_code()

    def cause(self) -> bool:
        """Send SIGTERM; False when no fault was caused."""
        self.injector.terminate_server()
        return True

    def exited(self) -> bool:
        return self.injector.processes.exit_code() is not None

    def read_exit_code(self) -> int | None:
        return self.injector.processes.exit_code()

    def verdict(self) -> None:
        if not self.fault_attempted or self.outcome.incomplete:
            return
        outcome = self.outcome
        sigterm_at = event_time(outcome.events, "SIGTERM")
        self.injector._steady(outcome, sigterm_at)
        outcome.classify(self.injector.errors_after(outcome, sigterm_at))
        wait_until(lambda: not still_running(self.before), 5)
        outcome.left_behind = still_running(self.before) if self.before else None
        log = self.injector.target.launcher.log_text(400)
        outcome.shutdown_log = log[log.rfind("Signal (15) received"):] if "Signal (15) received" in log else ""

    def exercised(self) -> str | None:
        return None if self.outcome.in_flight_at_sigterm else NOTHING_IN_FLIGHT

    def restore(self) -> str | None:
        """Start the server again (timed: `restart_s`), then the full restore. Nothing to do when
        no SIGTERM was sent."""
        if not self.fault_attempted:
            return None
        launcher = self.injector.target.launcher
        started = time.monotonic()
        try:
            launcher.stop()
            launcher.start()
            self.outcome.restart_s = time.monotonic() - started
        except Exception as exc:
            self.outcome.notes.append(f"the launcher could not start the server again: {one_line(exc)}")
        return super().restore()


def _catching(function: Callable[[], Any], errors: list[BaseException]) -> Callable[[], None]:
    def run() -> None:
        try:
            function()
        except BaseException as exc:  # reported by the experiment, not lost in a thread
            errors.append(exc)
    return run


def _server_answered(exc: BaseException) -> bool:
    """True when `exc` is an error answer of the server (it refused), not a timeout or a lost
    connection (when the request may have been carried out all the same)."""
    from tritonclient.utils import InferenceServerException

    return isinstance(exc, InferenceServerException) and exc.status() is not None


_one_line = one_line


def _readiness_path(target: Any, model: str) -> str:
    """The endpoint whose 200 means "ready" for a restart or shutdown watch: /v2/health/ready, or,
    where it was not 200 when the run started (a model that failed to load keeps strict
    readiness at 400), the experiment's model's own ready endpoint."""
    return "/v2/health/ready" if initial_state_of(target).ready else f"/v2/models/{model}/ready"
