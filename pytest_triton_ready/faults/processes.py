"""The server's processes as the fault injector sees them: python backend stubs per model
instance, signals to one process, and what is left behind after a kill.

Everything goes through the launcher's protocol (`pytest_triton_ready.launchers.Launcher`): what
a launcher can do is read from its declared `capabilities`, never probed. On this host the embedded
launcher finds the stubs among the server's descendants with psutil; the container launcher finds
them inside the container. A stub's command line carries the model file
(`.../<model>/<version>/model.py`) and the instance name (`<model>_<group>_<index>`).
"""

from __future__ import annotations

from ..launchers import Launcher, Unsupported
from ..launchers.process import StubProcess, local_stubs, process_tree, still_running, stub_of

__all__ = ["ServerProcesses", "StubProcess", "local_stubs", "process_tree", "still_running", "stub_of"]


class ServerProcesses:
    """Process control over the server a launcher owns: stubs, signals, exit."""

    def __init__(self, launcher: Launcher) -> None:
        self.launcher = launcher

    @property
    def capabilities(self):
        return self.launcher.capabilities

    def stubs(self, model: str) -> list[StubProcess]:
        if not self.capabilities.can_signal_instance:
            return []
        return self.launcher.stubs(model)

    def signal(self, pid: int, sig: int) -> None:
        if not self.capabilities.can_signal_instance:
            raise Unsupported(f"the {self.launcher.name} launcher cannot signal a process of the server")
        self.launcher.signal_process(pid, sig)

    def terminate_server(self) -> None:
        """SIGTERM the server process only (what an orchestrator does), not its whole group."""
        self.launcher.terminate()

    def exit_code(self) -> int | None:
        """The server's exit code once it exited, None while it runs."""
        return self.launcher.exit_code()

    def tree(self) -> list[int]:
        """The server's processes, when this host can see them ([] otherwise)."""
        if not self.capabilities.can_see_processes:
            return []
        return self.launcher.process_tree() or []
