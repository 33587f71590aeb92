"""A real fleet for the tests: embedded tritonservers on loopback behind a real nginx.

nginx is configured and started here (`nginx -c <tmp conf> -p <tmp dir>`, `daemon off`, its pid
file, error log and temp paths in the tmp dir): one HTTP listener (`proxy_pass` to the replicas'
HTTP ports) and a separate HTTP/2 listener for gRPC (`grpc_pass` to their gRPC ports); passive
health checks (`max_fails=1 fail_timeout=...`) and retries of refused connections on the next
replica. Everything is stopped at the end.
"""

from __future__ import annotations

import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from pytest_triton_ready.launchers.embedded import EmbeddedLauncher
from pytest_triton_ready.launchers.process import free_port

IDENTITY = Path(__file__).resolve().parent / "repositories" / "load" / "identity"

NGINX_CONF = """\
daemon off;
worker_processes 1;
pid {dir}/nginx.pid;
error_log {dir}/error.log warn;
events {{ worker_connections 4096; }}
http {{
    access_log off;
    client_body_temp_path {dir}/tmp/body;
    proxy_temp_path {dir}/tmp/proxy;
    fastcgi_temp_path {dir}/tmp/fastcgi;
    uwsgi_temp_path {dir}/tmp/uwsgi;
    scgi_temp_path {dir}/tmp/scgi;
    upstream triton_http {{
{http_servers}
        keepalive 64;
    }}
    upstream triton_grpc {{
{grpc_servers}
        keepalive 64;
    }}
    server {{
        listen 127.0.0.1:{http_port};
        location / {{
            proxy_pass http://triton_http;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_next_upstream error timeout;
            proxy_connect_timeout 2s;
        }}
    }}
    server {{
        listen 127.0.0.1:{grpc_port} http2;
        location / {{
            grpc_pass grpc://triton_grpc;
            grpc_next_upstream error timeout;
            grpc_connect_timeout 2s;
        }}
    }}
}}
"""


def identity_repository(directory: Path, version: int = 1) -> Path:
    """A repository with the `identity` model (python backend, 1 instance) at `version`."""
    model = directory / "identity"
    model.mkdir(parents=True)
    shutil.copy(IDENTITY / "config.pbtxt", model / "config.pbtxt")
    (model / str(version)).mkdir()
    shutil.copy(IDENTITY / "1" / "model.py", model / str(version) / "model.py")
    return directory


def wait_port(port: int, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with socket.socket() as sock:
            sock.settimeout(0.2)
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise RuntimeError(f"nothing listens on 127.0.0.1:{port} after {timeout_s} s")


class Nginx:
    """A real nginx in front of the replicas, with everything of its own in `directory`."""

    def __init__(self, directory: Path, http_upstreams: list[int], grpc_upstreams: list[int],
                 fail_timeout_s: int = 10) -> None:
        self.directory = directory
        self.http_port = free_port()
        self.grpc_port = free_port()
        (directory / "tmp").mkdir(parents=True, exist_ok=True)
        servers = lambda ports: "\n".join(  # noqa: E731
            f"        server 127.0.0.1:{p} max_fails=1 fail_timeout={fail_timeout_s}s;" for p in ports)
        self.conf = directory / "nginx.conf"
        self.conf.write_text(NGINX_CONF.format(dir=directory, http_servers=servers(http_upstreams),
                                               grpc_servers=servers(grpc_upstreams), http_port=self.http_port,
                                               grpc_port=self.grpc_port))
        self.process: subprocess.Popen | None = None

    def start(self) -> None:
        self.process = subprocess.Popen(["nginx", "-c", str(self.conf), "-p", str(self.directory)],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
        try:
            wait_port(self.http_port)
            wait_port(self.grpc_port)
        except RuntimeError:
            self.stop()
            raise RuntimeError(f"nginx did not start: {self.error_log()}") from None

    def error_log(self) -> str:
        path = self.directory / "error.log"
        return path.read_text()[-2000:] if path.exists() else ""

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGQUIT)  # graceful: finish requests, then exit
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            import os

            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=5)

    @property
    def http_url(self) -> str:
        return f"http://127.0.0.1:{self.http_port}"

    @property
    def grpc_url(self) -> str:
        return f"127.0.0.1:{self.grpc_port}"


@dataclass
class TestFleet:
    """Replicas (embedded launchers) named replica-1.. and the nginx in front of them."""

    launchers: dict[str, EmbeddedLauncher]
    nginx: Nginx
    versions: dict[str, int] = field(default_factory=dict)

    def yaml(self, extra: str = "") -> str:
        """The `fleet:` section naming every replica, with a kill action for each."""
        lines = ["fleet:", "  replicas:"]
        for name, launcher in self.launchers.items():
            endpoints = launcher.endpoints
            lines += [f"    - name: {name}", f"      http_url: {endpoints.http_url}",
                      f"      grpc_url: {endpoints.grpc_url}", f"      metrics_url: {endpoints.metrics_url}",
                      f"      kill: {sys.executable} -c 'import os, signal; os.killpg({launcher.pid}, signal.SIGKILL)'"]
        return "\n".join(lines) + "\n" + extra

    def close(self) -> None:
        try:
            self.nginx.stop()
        finally:
            for launcher in self.launchers.values():
                launcher.cleanup()


def start_fleet(directory: Path, versions: list[int]) -> TestFleet:
    """One replica per entry of `versions` (the identity model's version it serves), started in
    parallel, and nginx in front of them."""
    launchers = {}
    for i, version in enumerate(versions, 1):
        repository = identity_repository(directory / f"replica-{i}", version)
        launchers[f"replica-{i}"] = EmbeddedLauncher(repository, startup_timeout_s=180)
    errors: list[BaseException] = []

    def start(launcher: EmbeddedLauncher) -> None:
        try:
            launcher.start()
        except BaseException as exc:  # noqa: BLE001 - re-raised below
            errors.append(exc)

    threads = [threading.Thread(target=start, args=(launcher,)) for launcher in launchers.values()]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    nginx = None
    try:
        if errors:
            raise errors[0]
        nginx = Nginx(directory / "nginx", [server.ports["http"] for server in launchers.values()],
                      [server.ports["grpc"] for server in launchers.values()])
        nginx.start()
    except BaseException:
        for launcher in launchers.values():
            launcher.cleanup()
        raise
    return TestFleet(launchers, nginx, {f"replica-{i}": v for i, v in enumerate(versions, 1)})
