"""PERF-4's experiments that load a model again under traffic: a forced reload (the same model with a
harmless config change) and a new version rolled out on a scratch copy of the repository."""

from __future__ import annotations

import copy
import time
from contextlib import ExitStack
from typing import Any

from .experiment import one_line
from .injector_experiment import InjectorExperiment
from .outcomes import ReloadOutcome
from .probes import Watcher, wait_until
from .scratch import ScratchUnsupported, add_version, numeric_versions, scratch_server

RELOAD_MARKER = "triton_ready_reload"


def with_reload_marker(config: dict[str, Any]) -> dict[str, Any]:
    """The effective config with one harmless change (a model parameter no backend reads), so that
    a load with it is a real reload; a load of an unchanged model is a no-op."""
    changed = copy.deepcopy(config)
    parameters = changed.get("parameters") or {}
    parameters[RELOAD_MARKER] = {"string_value": f"{time.time():.6f}"}
    changed["parameters"] = parameters
    return changed



class ForcedReload(InjectorExperiment):
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
            self.refused = server_answered(exc)
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


class VersionRolloutExperiment(InjectorExperiment):
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


def server_answered(exc: BaseException) -> bool:
    """True when `exc` is an error answer of the server (it refused), not a timeout or a lost
    connection (when the request may have been carried out all the same)."""
    from tritonclient.utils import InferenceServerException

    return isinstance(exc, InferenceServerException) and exc.status() is not None

