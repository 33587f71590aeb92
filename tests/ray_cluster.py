"""A real two-node Ray cluster on this machine, for the tests and the benchmark: a head node
(`ray start --head --include-dashboard=false --num-cpus=1`) and a second node joined with
`ray start --address`, each with its own free ports, in a private temp dir. Stopped by ending the
processes this cluster started (found by that temp dir), never by name."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

from pytest_triton_ready.launchers.process import free_port


def ray_binary() -> str:
    here = Path(sys.executable).parent / "ray"
    return str(here) if here.exists() else (shutil.which("ray") or "ray")


class RayCluster:
    def __init__(self, nodes: int = 2) -> None:
        # Ray's unix sockets live under the temp dir: keep the path short.
        self.temp_dir = Path(tempfile.mkdtemp(prefix="rtr-", dir="/tmp"))
        self.port = free_port()
        self.nodes = nodes
        self.address = f"127.0.0.1:{self.port}"
        self.env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0", "RAY_DISABLE_DOCKER_CPU_WARNING": "1"}

    def _node_ports(self) -> list[str]:
        return [f"--node-manager-port={free_port()}", f"--object-manager-port={free_port()}",
                f"--dashboard-agent-listen-port={free_port()}", f"--dashboard-agent-grpc-port={free_port()}",
                f"--metrics-export-port={free_port()}", f"--runtime-env-agent-port={free_port()}",
                "--min-worker-port=0", "--max-worker-port=0"]

    def start(self) -> RayCluster:
        common = ["--num-cpus=1", "--disable-usage-stats", "--node-ip-address=127.0.0.1"]
        head = [ray_binary(), "start", "--head", f"--port={self.port}", "--include-dashboard=false",
                f"--temp-dir={self.temp_dir}", f"--ray-client-server-port={free_port()}", *common, *self._node_ports()]
        self._run(head)
        for _ in range(self.nodes - 1):
            self._run([ray_binary(), "start", f"--address={self.address}", *common, *self._node_ports()])
        self._wait_nodes()
        return self

    def _run(self, command: list[str]) -> None:
        done = subprocess.run(command, env=self.env, capture_output=True, text=True, timeout=180)
        if done.returncode != 0:
            self.stop()
            raise RuntimeError(f"{' '.join(command[:3])} failed ({done.returncode}): "
                               f"{(done.stderr or done.stdout).strip()[-1500:]}")

    def _wait_nodes(self, timeout_s: float = 60.0) -> None:
        code = ("import ray,sys; ray.init(address=sys.argv[1], logging_level='ERROR', log_to_driver=False); "
                "print(sum(1 for n in ray.nodes() if n['Alive']))")
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            done = subprocess.run([sys.executable, "-c", code, self.address], env=self.env, capture_output=True,
                                  text=True, timeout=120)
            if done.returncode == 0 and done.stdout.strip().splitlines()[-1:] == [str(self.nodes)]:
                return
            time.sleep(1)
        raise RuntimeError(f"the Ray cluster at {self.address} did not reach {self.nodes} alive nodes")

    def processes(self) -> list[psutil.Process]:
        """The processes of this cluster: their command lines name its temp dir or session, or they
        descend from one that does (workers rename themselves `ray::...`)."""
        marker = str(self.temp_dir)
        roots = []
        for process in psutil.process_iter(["cmdline"]):
            try:
                if any(marker in part for part in process.info["cmdline"] or []):
                    roots.append(process)
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                continue
        found = {p.pid: p for p in roots}
        for root in roots:
            try:
                for child in root.children(recursive=True):
                    found.setdefault(child.pid, child)
            except psutil.NoSuchProcess:
                continue
        return list(found.values())

    def usage(self) -> dict[str, float]:
        """Resident memory (MB) and CPU time (s) of this cluster's processes, now."""
        rss = cpu = 0.0
        count = 0
        for process in self.processes():
            try:
                rss += process.memory_info().rss
                times = process.cpu_times()
                cpu += times.user + times.system
                count += 1
            except psutil.NoSuchProcess:
                continue
        return {"processes": count, "rss_mb": round(rss / 2**20, 1), "cpu_s": round(cpu, 2)}

    def stop(self) -> None:
        processes = self.processes()
        for process in processes:
            try:
                process.send_signal(signal.SIGTERM)
            except psutil.NoSuchProcess:
                pass
        _, alive = psutil.wait_procs(processes, timeout=10)
        for process in alive:
            try:
                process.kill()
            except psutil.NoSuchProcess:
                pass
        shutil.rmtree(self.temp_dir, ignore_errors=True)
