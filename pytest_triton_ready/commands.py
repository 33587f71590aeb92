"""The one way this project runs a command the team declared (a fault action, a replica's kill or
restore, the command that lists a fleet's replicas): a real process in its own process group,
ended with that whole group at its timeout, its exit code, duration and output kept as evidence.

A command is a shell line (run with /bin/sh -c) or an argv list (run as is).
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

OUTPUT_KEPT = 4000  # characters of stdout and of stderr kept as evidence


@dataclass
class CommandResult:
    """What one command did: the evidence a check keeps."""

    what: str  # where the command was declared, e.g. attach.fault_actions.server_crash.action
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


def run_command(command: str | Sequence[str], what: str, *, timeout_s: float = 60.0,
                env: Mapping[str, str] | None = None) -> CommandResult:
    """Run `command` (a shell line, or an argv list) in its own process group, with the process's
    environment plus `env`; end the whole group at `timeout_s`. Never raises for the command's own
    failure: the result says what happened."""
    shown = command if isinstance(command, str) else shlex.join(command)
    result = CommandResult(what, shown, timeout_s=timeout_s)
    argv = ["/bin/sh", "-c", command] if isinstance(command, str) else list(command)
    started = time.monotonic()
    try:
        process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                                   env={**os.environ, **(env or {})}, start_new_session=True)
    except OSError as exc:
        result.start_error = exc.strerror or str(exc)
        return result
    try:
        out, err = process.communicate(timeout=timeout_s)
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
