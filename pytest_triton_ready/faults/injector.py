"""FaultInjector: breaks the server under test on purpose, under open-loop traffic, and brings it
back. What the `faults` fixture hands a check.

Low-level faults: `kill_stub`, `kill_server` + `start_server`, `terminate_server` (SIGTERM),
`reload` (a config override: a real reload), `unload_and_load`. Experiments (steady state, fault,
recovery, timeline): `forced_reload`, `version_rollout`, `instance_restart`, `server_restart`,
`graceful_shutdown` (their steps: reload_experiments.py, crash_experiments.py). Every destructive
experiment leaves the server ready, every instance answering, before it returns (`restore`), so the
checks after it measure a healthy server.

On a decoupled (streaming) model the traffic is streamed and the probes are streamed requests
(faults/stream_traffic.py): a forced reload, a rollout and a crash + restart run the same way on it.
"""

from __future__ import annotations

import signal
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..launchers.process import last_error_line
from ..load.streaming.single import stream_once
from ..server.models import initial_state_of, instance_count, is_decoupled
from .crash_experiments import GracefulShutdown, InstanceRestart, ServerRestart
from .declared_experiments import DECLARED
from .experiment import Experiment, one_line, run_experiment
from .outcomes import InstanceRestartOutcome, Outcome, ReloadOutcome, ServerRestartOutcome, ShutdownOutcome
from .probes import InstanceProber, wait_until
from .processes import ServerProcesses, StubProcess
from .reload_experiments import ForcedReload, VersionRolloutExperiment, with_reload_marker
from .schema import FaultPlan
from .timeline import event_time, failed_between, peak_p99_ms, steady_state

if TYPE_CHECKING:
    from ..server.under_test import ServerUnderTest


class FaultInjector:
    """Fault injection against one Target, with traffic from one LoadEngine."""

    def __init__(self, target: ServerUnderTest, engine: Any, plan: FaultPlan, success_rate_min: float = 0.999) -> None:
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
        """What this run may do to the server (`pytest_triton_ready.policy.Policy`)."""
        if getattr(self, "_policy", None) is None:
            from ..policy import policy

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
        from ..policy import FAULT_CHECK

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
        from ..server.pipelines import composing_models

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
        from ..server.client import TritonClient

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
        self._changed()
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

    def server_death(self, error: BaseException) -> str:
        """How the server went down, from a request that could not reach it: its exit code and the
        last error line of its log where this run owns the process, else the client's error."""
        code = self.processes.exit_code() if self.owns_process else None
        if code is None:
            return f"the server stopped answering ({one_line(error)})"
        last = last_error_line(self.target.launcher.log_text(400))
        return f"tritonserver exited with code {code}; the last error in its log: {last}"

    def kill_server(self) -> None:
        """SIGKILL the server and everything it started (a crash), through its launcher."""
        self._changed()
        self.target.launcher.kill()

    def start_server(self) -> None:
        """Start the server again on the same ports, through its launcher."""
        self._changed()
        self.target.launcher.start()

    def terminate_server(self) -> None:
        """SIGTERM the server process, as an orchestrator does to stop it."""
        self._changed()
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
            from ..policy import guard_traffic  # policy reads the fault declarations: imported here
            from .stream_traffic import StreamingTraffic, users_for

            guard_traffic(self.policy, concurrency=users_for(plan.rate_per_s), rate=plan.rate_per_s)
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
        self._changed()
        try:
            return run_experiment(experiment)
        finally:
            self._changed()

    def _changed(self) -> None:
        """No measurement from before a fault may stand in for one after it (LoadEngine.server_changed)."""
        changed = getattr(self.engine, "server_changed", None)
        if changed is not None:
            changed()

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
        return self._pick("new_version", VersionRolloutExperiment, model)

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

