"""PERF-4's experiments that kill or stop something under traffic: one instance's stub (instance
restart), the whole server (SIGKILL and restart) and a graceful shutdown (SIGTERM)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..server.client import http_status
from ..server.models import initial_state_of
from .experiment import one_line
from .injector_experiment import InjectorExperiment
from .outcomes import NOTHING_IN_FLIGHT, InstanceRestartOutcome, ServerRestartOutcome, ShutdownOutcome
from .probes import Watcher, wait_until
from .processes import still_running
from .timeline import event_time, failed_between, recovered_at

if TYPE_CHECKING:
    from ..server.under_test import ServerUnderTest

DOWN_WAIT_S = 10.0  # how long a crash may take to show as a server that stops answering


class InstanceRestart(InjectorExperiment):
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
        outcome = self.outcome
        self.fault_attempted = True
        outcome.instance = self.cause()
        if outcome.instance is None:
            return
        self.note_fault(traffic, self.event)
        try:
            self._observe_and_recover(traffic)
        except ConnectionError as exc:  # TritonUnreachable: the kill of one stub took the server down
            outcome.server_died = self.injector.server_death(exc)
            traffic.event("the server stopped answering")

    def _observe_and_recover(self, traffic: Any) -> None:
        injector, outcome, model, plan = self.injector, self.outcome, self.model, self.plan
        client, prober = injector.client, self.prober
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


class ServerRestart(InjectorExperiment):
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
        self.caused = self.cause()
        if not self.caused:
            return
        outcome.kill_s = time.monotonic() - killed
        # The watcher that times the recovery must not see the old server still answering.
        down = wait_until(lambda: http_status(f"{http}/v2/health/live", 0.5) is None, self.down_wait_s, 0.02)
        outcome.down_s = None if down is None else time.monotonic() - killed
        outcome.left_behind = still_running(self.before) if self.before else None
        ready_path = ready_endpoint(injector.target, self.model)
        watcher = Watcher({"live": lambda: http_status(f"{http}/v2/health/live", 1.0) == 200,
                           "ready": lambda: http_status(f"{http}{ready_path}", 1.0) == 200,
                           "first correct inference": self._correct_inference}, on_first=traffic.event)
        traffic.event("restart")
        watcher.start()
        catching(self.bring_back, self.starter_error)()
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

    def exercised(self) -> str | None:
        """The server went down: its URL stopped answering after the kill. A restart that never
        happened would pass "time until the first correct inference" at once."""
        if self.outcome.down_s is not None or not self.caused:
            return None  # not caused: the failed action is the finding (a declared command's error)
        return (f"no restart was observed: the server's URL kept answering for {self.down_wait_s:g} s after the "
                f"{self.fault_label}, so the time to recover was not measured")

    fault_label = "SIGKILL"
    down_wait_s = DOWN_WAIT_S
    caused = False

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


class GracefulShutdown(InjectorExperiment):
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
        ready_path = ready_endpoint(injector.target, self.model)
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


def catching(function: Callable[[], Any], errors: list[BaseException]) -> Callable[[], None]:
    def run() -> None:
        try:
            function()
        except BaseException as exc:  # reported by the experiment, not lost in a thread
            errors.append(exc)
    return run



def ready_endpoint(target: ServerUnderTest, model: str) -> str:
    """The endpoint whose 200 means "ready" for a restart or shutdown watch: /v2/health/ready, or,
    where it was not 200 when the run started (a model that failed to load keeps strict
    readiness at 400), the experiment's model's own ready endpoint."""
    return "/v2/health/ready" if initial_state_of(target).ready else f"/v2/models/{model}/ready"

