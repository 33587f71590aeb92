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

import os
import signal
import subprocess
import time
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import Field

from ..yamlschema import Section, setting

FAULT_KINDS = {
    "server_crash": "crash + restart (test_server_crash_restart_answers_correctly)",
    "sigterm": "SIGTERM under traffic (test_sigterm_under_traffic_is_graceful)",
    "instance_kill": "dead instance (test_dead_instance_is_reported_and_recovers)",
    "new_version": "new version rollout (test_new_version_rollout_under_traffic_loses_no_request)",
}
OUTPUT_KEPT = 4000  # characters of stdout and of stderr kept as evidence


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


@dataclass
class CommandResult:
    """What one declared command did: the evidence a check keeps."""

    what: str  # e.g. attach.fault_actions.server_crash.action
    command: str
    exit_code: int | None = None
    duration_s: float = 0.0
    stdout: str = ""
    stderr: str = ""
    timed_out: bool = False
    timeout_s: float = 0.0
    start_error: str | None = None

    @property
    def ok(self) -> bool:
        return self.start_error is None and not self.timed_out and self.exit_code == 0

    def last_line(self) -> str:
        lines = [line.strip() for line in self.stdout.splitlines() if line.strip()]
        return lines[-1] if lines else ""

    def problem(self) -> str | None:
        """One line saying how the command failed, None when it succeeded."""
        if self.start_error is not None:
            return f"{self.what} (`{self.command}`) could not be started: {self.start_error}"
        if self.timed_out:
            return (f"{self.what} (`{self.command}`) did not finish within its timeout of {self.timeout_s:g} s "
                    "and was ended")
        if self.exit_code != 0:
            said = _last(self.stderr) or _last(self.stdout)
            return (f"{self.what} (`{self.command}`) exited with code {self.exit_code} after {self.duration_s:.1f} s"
                    + (f": {said}" if said else ""))
        return None

    def evidence(self) -> str:
        status = ("could not start: " + self.start_error if self.start_error else
                  f"timed out after {self.timeout_s:g} s" if self.timed_out else f"exit code {self.exit_code}")
        return (f"$ {self.command}\n{status}, {self.duration_s:.2f} s\n"
                f"--- stdout\n{self.stdout.rstrip()}\n--- stderr\n{self.stderr.rstrip()}").rstrip()

    def to_dict(self) -> dict[str, Any]:
        return {"what": self.what, "command": self.command, "exit_code": self.exit_code,
                "duration_s": round(self.duration_s, 3), "timed_out": self.timed_out, "start_error": self.start_error}


def run_command(command: Command, what: str, env: dict[str, str] | None = None) -> CommandResult:
    """Run `command` as a real process in its own process group; end the group at the timeout."""
    result = CommandResult(what, command.shown(), timeout_s=command.timeout_s)
    environment = {**os.environ, **(env or {}), **command.env}
    argv = ["/bin/sh", "-c", command.run]
    started = time.monotonic()
    try:
        process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                                   env=environment, start_new_session=True)
    except OSError as exc:
        result.start_error = exc.strerror or str(exc)
        return result
    try:
        out, err = process.communicate(timeout=command.timeout_s)
    except subprocess.TimeoutExpired:
        result.timed_out = True
        _end_group(process)
        out, err = process.communicate()
    except BaseException:
        _end_group(process)
        process.communicate()
        raise
    result.duration_s = time.monotonic() - started
    result.exit_code = process.returncode
    result.stdout = out.decode(errors="replace")[-OUTPUT_KEPT:]
    result.stderr = err.decode(errors="replace")[-OUTPUT_KEPT:]
    return result


def _end_group(process: subprocess.Popen) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _last(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1][:300] if lines else ""
