"""Declared fault actions: how to cause a fault in a deployment this run does not own.

Against an attached server the run cannot kill a process or signal one; the team says how, in
the YAML section `attach.fault_actions`, in the manner of Chaos Toolkit's actions and probes:

    attach:
      allow: [faults]
      fault_actions:
        server_crash:                 # crash + restart: kill one replica or the server
          action: {run: "kubectl delete pod -l app=triton --grace-period=0 --force", timeout_s: 30}
        sigterm:                      # graceful shutdown: SIGTERM to the server process
          action: {run: "kubectl exec deploy/triton -- kill -TERM 1"}
          probe: {run: "kubectl get pod -l app=triton -o jsonpath='{..lastState.terminated.exitCode}'"}
        instance_kill:                # one model instance (a python backend stub) killed
          action: {run: "kubectl exec deploy/triton -- pkill -9 -f scale_0_0"}
        new_version:                  # version N+1 of the model appears in the deployment's repository
          action: {run: "gsutil -m cp -r gs://models/$TRITON_READY_MODEL/$TRITON_READY_OLD_VERSION gs://models/$TRITON_READY_MODEL/$TRITON_READY_NEW_VERSION"}
          restore: {run: "gsutil -m rm -r gs://models/$TRITON_READY_MODEL/$TRITON_READY_NEW_VERSION"}

Each command runs as a real process (a shell line through /bin/sh -c) with a timeout
that ends its whole process group; its exit code, duration and output are kept as the check's
evidence. `action` causes the fault; `probe` (optional) runs once the fault took effect and says,
by its exit code, that it did (for `sigterm` its last output line, when a whole number, is the
server's exit code); `restore` (optional) brings the server back where the deployment does not do
it by itself (e.g. `systemctl start triton`), and undoes `new_version`. The experiment's traffic,
steady-state rule, timeline and verdict are the built-in ones.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from .commands import CommandResult
from .commands import run_command as run
from .yamlschema import Section, setting

__all__ = ["Command", "CommandResult", "DeclaredFault", "run_declared"]

FAULT_KINDS = {
    "server_crash": "crash + restart (test_server_crash_restart_answers_correctly)",
    "sigterm": "SIGTERM under traffic (test_sigterm_under_traffic_is_graceful)",
    "instance_kill": "dead instance (test_dead_instance_is_reported_and_recovers)",
    "new_version": "new version rollout (test_new_version_rollout_under_traffic_loses_no_request)",
}


class Command(Section):
    """One declared command: run as a real process with a timeout; its output is kept as evidence."""

    run: str = Field(min_length=1, description="the command: a shell line, run with /bin/sh -c",
                     json_schema_extra={"shown_default": "required"})
    timeout_s: float = setting(60.0, "the command is ended (its whole process group) after this long", unit="s",
                               gt=0)
    env: dict[str, str] = setting(dict, "extra environment variables for the command")

    def shown(self) -> str:
        return self.run


class DeclaredFault(Section):
    """How to cause one fault in the deployment, see it took effect, and bring the server back."""

    action: Command = Field(description="causes the fault (required)")
    probe: Command | None = setting(None, "runs once the fault took effect: exit 0 says it did (sigterm: its last "
                                          "output line, a whole number, is the server's exit code)")
    restore: Command | None = setting(None, "brings the server back where the deployment does not by itself; "
                                            "undoes new_version (required there)")


FaultKind = Literal["server_crash", "sigterm", "instance_kill", "new_version"]
FAULT_ACTIONS_HELP = ("how to cause PERF-4's faults in this deployment, by kind: server_crash (kill the server or "
                      "one replica), sigterm (SIGTERM to the server process), instance_kill (kill one model "
                      "instance), new_version (put version N+1 of $TRITON_READY_MODEL into the repository; restore "
                      "removes it). See docs/faults.md")


def run_declared(command: Command, what: str, env: dict[str, str] | None = None) -> CommandResult:
    """Run the declared `command` through the one command runner (`pytest_triton_ready.commands`):
    its own process group, ended at its timeout, output kept; `env` and the command's own `env`
    added to the environment."""
    return run(command.run, what, timeout_s=command.timeout_s, env={**(env or {}), **command.env})
