"""PERF-4's destructive experiments against a server this run does not own, with the faults caused
by the commands the team declared (`attach.fault_actions`, see declared.py).

Each one is the built-in experiment with its fault step replaced: the same traffic, steady-state
rule, timeline, verdict and restore in a `finally` (experiment.py). What the run cannot see on a
server it does not own (its processes, its exit code) comes from the declared probe or is
reported as not seen. A declared command that fails or times out is an error finding with its
output as evidence; the restore still runs.
"""

from __future__ import annotations

import time
from contextlib import ExitStack
from typing import Any
from urllib.parse import urlsplit

from ..fault_declarations import CommandResult, DeclaredFault, run_declared
from ..server.client import http_status
from ..server.models import initial_state_of
from .crash_experiments import GracefulShutdown, InstanceRestart, ServerRestart
from .injector_experiment import InjectorExperiment
from .probes import wait_until
from .reload_experiments import VersionRolloutExperiment


class _Declared:
    """What every declared experiment shares: running its commands and keeping their evidence."""

    kind: str
    declared: DeclaredFault
    outcome: Any
    injector: Any
    model: str | None

    def _setup(self, declared: DeclaredFault) -> None:
        self.declared = declared
        self.outcome.declared_by = f"attach.fault_actions.{self.kind}"

    def environment(self) -> dict[str, str]:
        endpoints = self.injector.target.endpoints
        env = {"TRITON_READY_FAULT": self.kind, "TRITON_READY_MODEL": self.model or "",
               "TRITON_READY_HTTP_URL": endpoints.http_url, "TRITON_READY_GRPC_URL": endpoints.grpc_url,
               "TRITON_READY_METRICS_URL": endpoints.metrics_url}
        for name in ("old", "new"):
            version = getattr(self, name, None)
            if version is not None:
                env[f"TRITON_READY_{name.upper()}_VERSION"] = str(version)
        return env

    def run_step(self, step: str) -> CommandResult | None:
        """Run the declared `step` (action, probe, restore); None when it is not declared."""
        command = getattr(self.declared, step)
        if command is None:
            return None
        result = run_declared(command, f"attach.fault_actions.{self.kind}.{step}", self.environment())
        self.outcome.commands.append(result)
        return result

    def run_action(self) -> bool:
        """The fault itself; False (and an error finding) when the command failed or timed out."""
        result = self.run_step("action")
        if not result.ok:
            self._fail(f"{result.problem()}: the fault may or may not have happened")
            return False
        return True

    def run_probe(self) -> CommandResult | None:
        result = self.run_step("probe")
        if result is not None and not result.ok:
            self._fail(f"{result.problem()}: the declared probe does not confirm the fault took effect")
        return result

    def _fail(self, problem: str) -> None:
        outcome = self.outcome
        outcome.action_error = problem if not outcome.action_error else f"{outcome.action_error}; {problem}"

    def _live(self) -> bool:
        return http_status(f"{self.injector.target.endpoints.http_url}/v2/health/live", 0.5) == 200

    def _gone(self) -> bool:
        """Nothing accepts a connection on the gRPC and metrics ports: the process has exited (or
        is about to). Triton closes its HTTP port first, at the signal, so HTTP alone says nothing."""
        endpoints = self.injector.target.endpoints
        metrics = urlsplit(endpoints.metrics_url)
        return not _accepts(endpoints.grpc_url) and not _accepts(f"{metrics.hostname}:{metrics.port or 80}")


class DeclaredServerRestart(_Declared, ServerRestart):
    """Crash + restart: the declared action kills the server (or a replica); the deployment (or
    the declared restore) brings it back; the times are measured from the start of the action."""

    def __init__(self, injector: Any, model: str, declared: DeclaredFault) -> None:
        super().__init__(injector, model)
        self._setup(declared)

    fault_label = "declared action (it hit one replica behind a load balancer, or did not happen: a declared probe shows which)"

    def cause(self) -> bool:
        return self.run_action()

    def bring_back(self) -> None:
        result = self.run_step("restore")
        if result is not None and not result.ok:
            self._fail(f"{result.problem()}: the server may not come back by itself")
        self.run_probe()

    def restore(self) -> str | None:
        return _restore_declared(self)


class DeclaredGracefulShutdown(_Declared, GracefulShutdown):
    """SIGTERM: the declared action sends it; "exited" is the server no longer answering at all;
    the exit code is the declared probe's last output line."""

    def __init__(self, injector: Any, model: str, declared: DeclaredFault) -> None:
        super().__init__(injector, model)
        self._setup(declared)

    def prepare(self) -> None:
        injector = self.injector
        self.outcome.exit_timeout_s = float(injector.policy.exit_timeout_s)
        injector.client.reconnect()
        self.before = []  # the processes of a server this run does not own are not visible

    def cause(self) -> bool:
        return self.run_action()

    def exited(self) -> bool:
        return self._gone()

    def read_exit_code(self) -> int | None:
        if self.outcome.exit_s is None:
            return None
        result = self.run_probe()
        if result is None or not result.ok:
            return None
        line = result.last_line()
        if line.lstrip("-").isdigit():
            return int(line)
        self.outcome.notes.append(f"attach.fault_actions.sigterm.probe printed {line!r} last, not an exit code")
        return None

    def restore(self) -> str | None:
        if not self.fault_attempted:
            return None
        started = time.monotonic()
        result = self.run_step("restore")
        if result is not None and not result.ok:
            return result.problem()
        initial = initial_state_of(self.injector.target)
        if wait_until(lambda: initial.restored(self.injector.client), self.plan.recovery_timeout_s, 0.2) is not None:
            self.outcome.restart_s = time.monotonic() - started
        return InjectorExperiment.restore(self)

    def restore_advice(self) -> str:
        return _advice(self)


class DeclaredInstanceRestart(_Declared, InstanceRestart):
    """Dead instance: the declared action kills one model instance (its last output line, when
    given, names it); recovery is unload + load through the API, as for a launched server."""

    def __init__(self, injector: Any, model: str, declared: DeclaredFault) -> None:
        super().__init__(injector, model)
        self._setup(declared)

    def cause(self) -> str | None:
        if not self.run_action():
            return None
        name = self.outcome.commands[-1].last_line()
        self.run_probe()
        return name[:120] if name else "one instance (declared action)"

    def after_kill(self) -> None:
        self.outcome.restarted_by_server = None  # its processes are not visible from here
        self.outcome.plain_load_recovered = None

    def restore(self) -> str | None:
        return _restore_declared(self)


class DeclaredVersionRollout(_Declared, VersionRolloutExperiment):
    """New version: the declared action puts version N+1 into the deployment's repository, then a
    load picks it up under traffic on the server under test; the declared restore removes N+1
    and a load brings version N back."""

    def __init__(self, injector: Any, model: str, declared: DeclaredFault) -> None:
        super().__init__(injector, model)
        self._setup(declared)

    def unavailable(self) -> str | None:
        reason = InjectorExperiment.unavailable(self)
        if reason is None and self.declared.restore is None:
            reason = ("attach.fault_actions.new_version has no restore command: the run would leave the deployment "
                      "serving version N+1; declare how to remove it (restore)")
        return reason

    def prepare(self) -> None:
        injector = self.injector
        self.stack = ExitStack()
        self.endpoints = injector.target.endpoints
        self.client = injector.client
        self.engine = injector.engine
        versions = sorted(int(e["version"]) for e in self.client.repository_index()
                          if e.get("name") == self.model and str(e.get("version", "")).isdigit())
        if not versions:
            self.outcome.incomplete = f"the repository index lists no numeric version of {self.model}"
            return
        self.old, self.new = versions[-1], versions[-1] + 1
        self.outcome.old_version, self.outcome.new_version = str(self.old), str(self.new)
        self.original = self.client.model_config(self.model, fresh=True)
        self.override = None
        if "specific" in (self.original.get("version_policy") or {}):
            import copy

            self.override = copy.deepcopy(self.original)
            self.override["version_policy"] = {"specific": {"versions": [self.new]}}
            self.outcome.notes.append(f"the version policy is `specific`: version {self.new} was named in a config "
                                      "override")

    def place_new_version(self) -> bool:
        if not self.run_action():
            return False
        self.run_probe()
        return True

    def restore(self) -> str | None:
        """Remove version N+1 (declared restore), then load the model so that version N serves."""
        if not self.fault_attempted:
            return None
        result = self.run_step("restore")
        if result is not None and not result.ok:
            return result.problem()
        client = self.injector.new_client(timeout_s=self.plan.recovery_timeout_s)
        timeout = self.plan.recovery_timeout_s
        try:
            wait_until(lambda: all(e.get("state") not in ("LOADING", "UNLOADING") for e in client.repository_index()
                                   if e.get("name") == self.model), timeout, 0.2)
            client.load(self.model, config=self.original if self.override is not None else None)
            if wait_until(lambda: client.model_ready(self.model, str(self.old)), timeout, 0.2) is None:
                return f"version {self.old} of {self.model} did not serve again"
            # Version N+1 unloads in the background (seconds for the python backend); the server is
            # not ready (strict readiness) until it is gone.
            if wait_until(lambda: initial_state_of(self.injector.target).restored(client), timeout, 0.2) is None:
                states = [(e.get("version"), e.get("state")) for e in client.repository_index()
                          if e.get("name") == self.model]
                return f"the server was not ready again within {timeout:g} s ({self.model} versions: {states})"
        except Exception as exc:
            from .experiment import one_line

            return f"{self.model} could not be loaded again after the restore: {one_line(exc)}"
        finally:
            client.close()
        return None

    def restore_advice(self) -> str:
        return (f"the deployment may still hold or serve version {getattr(self, 'new', 'N+1')} of {self.model} "
                f"(a copy of version {getattr(self, 'old', 'N')}): remove it from the model repository "
                f"(attach.fault_actions.new_version.restore) and load {self.model} again "
                f"(POST /v2/repository/models/{self.model}/load)")


def _restore_declared(experiment: Any) -> str | None:
    """The full restore (server ready, every instance answering); when the server does not come
    back, the declared restore command once, then the full restore again."""
    error = InjectorExperiment.restore(experiment)
    if error is None or experiment.declared.restore is None:
        return error
    result = experiment.run_step("restore")
    if result is not None and not result.ok:
        return f"{error}; then {result.problem()}"
    return InjectorExperiment.restore(experiment)


def _advice(experiment: Any) -> str:
    restore = experiment.declared.restore
    how = f"run `{restore.shown()}` (attach.fault_actions.{experiment.kind}.restore)" if restore else \
        "start it again the way the deployment does"
    return (f"the server at {experiment.injector.target.endpoints.http_url} may be down, not ready, or serving "
            f"{experiment.model} with a dead instance: {how}, then check /v2/health/ready and one inference on "
            "every instance before trusting the checks after this one")


DeclaredServerRestart.restore_advice = _advice  # type: ignore[assignment]
DeclaredInstanceRestart.restore_advice = _advice  # type: ignore[assignment]

# fault kind -> the experiment that runs the action declared in attach.fault_actions for it
DECLARED: dict[str, type] = {"server_crash": DeclaredServerRestart, "sigterm": DeclaredGracefulShutdown,
                             "instance_kill": DeclaredInstanceRestart, "new_version": DeclaredVersionRollout}


def _accepts(host_port: str) -> bool:
    import socket

    host, _, port = host_port.rpartition(":")
    try:
        socket.create_connection((host.strip("[]"), int(port)), 0.5).close()
    except (OSError, ValueError):
        return False
    return True
