"""A real container engine for the container launcher's tests.

Where podman is installed (`.ci/run` installs podman, runc and debootstrap), the session starts
podman's Docker API service on a socket in its own temporary directory, configured by a
containers.conf of its own (CONTAINERS_CONF: /etc/containers is left alone), builds the
tritonserver image with scripts/build-triton-image.sh (cached between runs under
/var/cache/triton-ready and in podman's image store: seconds when current), points docker-py and
testcontainers at the socket (DOCKER_HOST, TESTCONTAINERS_RYUK_DISABLED: the reaper image cannot be
pulled without a registry), and stops the service at the end.

Without podman, a Docker engine that already answers is used with TRITON_READY_TEST_IMAGE (default
the official 24.10 image) and the launcher's default resource limits; with neither, the
real-container tests are skipped with that reason.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
BUILD_SCRIPT = REPO_ROOT / "scripts" / "build-triton-image.sh"
BUILT_IMAGE = "localhost/triton-ready/tritonserver:2.51.0-pytriton0.7.0"
OFFICIAL_IMAGE = "nvcr.io/nvidia/tritonserver:24.10-py3"
# This machine cannot raise resource limits (no CAP_SYS_RESOURCE), runc applies them, and crun
# refuses the hybrid cgroup layout; the limits are the ones the host allows.
CONTAINERS_CONF = """\
[containers]
default_ulimits = ["nofile=4096:4096", "nproc=4096:4096"]

[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
"""
# What the tests ask of podman here: Triton's 64 MiB stack, without the unlimited memlock the host
# cannot grant; nofile and nproc within the host's hard limits (podman's defaults are not applied
# once a container asks for any limit).
PODMAN_ULIMITS = "stack=67108864,nofile=4096,nproc=4096"


@dataclass
class ContainerEngine:
    """The engine the session's container tests use."""

    docker_host: str | None  # None: docker-py's default
    image: str
    kind: str
    ulimits: str | None  # None: the launcher's default
    build_s: float | None = None
    build_note: str = ""

    def client(self):
        import docker

        return docker.DockerClient(base_url=self.docker_host, timeout=60) if self.docker_host else docker.from_env()

    def launcher_args(self) -> list[str]:
        args = [f"--triton-image={self.image}", "--triton-gpus=none", "--triton-startup-timeout=300"]
        return args + ([f"--triton-ulimits={self.ulimits}"] if self.ulimits else [])

    def settings(self, **extra: str) -> dict[str, str]:
        settings = {"triton_image": self.image, "triton_gpus": "none", "triton_startup_timeout": "300"}
        if self.ulimits:
            settings["triton_ulimits"] = self.ulimits
        return {**settings, **extra}


def _docker_answers() -> bool:
    try:
        import docker

        docker.from_env(timeout=5).ping()
    except Exception:
        return False
    return True


def _end_with_parent() -> None:
    """In the child before exec: SIGTERM when the test session itself dies (killed outright), so
    the service never outlives it."""
    import ctypes

    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


class PodmanService:
    """`podman system service` on a socket of its own, in its own process group."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.socket = directory / "podman.sock"
        self.conf = directory / "containers.conf"
        self.conf.write_text(CONTAINERS_CONF)
        self.log = directory / "podman-service.log"
        self.process: subprocess.Popen | None = None

    @property
    def docker_host(self) -> str:
        return f"unix://{self.socket}"

    def start(self, timeout_s: float = 60.0) -> None:
        env = {**os.environ, "CONTAINERS_CONF": str(self.conf)}
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen(["podman", "system", "service", "--time=0", self.docker_host],
                                            stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True,
                                            preexec_fn=_end_with_parent)
        import docker

        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"podman system service exited with {self.process.returncode}: "
                                   f"{self.log.read_text()[-300:]}")
            if self.socket.exists():
                try:
                    docker.DockerClient(base_url=self.docker_host, timeout=5).ping()
                    return
                except Exception:
                    pass
            time.sleep(0.2)
        raise RuntimeError(f"podman system service did not answer on {self.socket} within {timeout_s:.0f} s")

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=15)


def build_image(engine: str = "podman") -> tuple[float, str]:
    """scripts/build-triton-image.sh: (seconds, its last lines). A failure fails the session's
    container tests with the script's own line."""
    started = time.monotonic()
    done = subprocess.run([str(BUILD_SCRIPT), BUILT_IMAGE], capture_output=True, text=True, timeout=1800,
                          env={**os.environ, "ENGINE": engine})
    seconds = time.monotonic() - started
    if done.returncode != 0:
        pytest.fail(f"building the tritonserver image failed: {done.stderr.strip().splitlines()[-1:]}", pytrace=False)
    return seconds, " | ".join(line for line in done.stderr.splitlines() if line.startswith("build-triton-image"))


@pytest.fixture(scope="session")
def container_engine(tmp_path_factory):
    """A real container engine with a tritonserver image (see the module's text); DOCKER_HOST and
    TESTCONTAINERS_RYUK_DISABLED are set for the session while it lives."""
    from conftest import artifact_dir

    with pytest.MonkeyPatch.context() as patch:
        if shutil.which("podman"):
            service = PodmanService(tmp_path_factory.mktemp("podman"))
            try:
                service.start()
                seconds, note = build_image("podman")
                patch.setenv("DOCKER_HOST", service.docker_host)
                patch.setenv("TESTCONTAINERS_RYUK_DISABLED", "true")
                engine = ContainerEngine(service.docker_host, BUILT_IMAGE, "podman", PODMAN_ULIMITS, seconds, note)
                (artifact_dir() / "container-engine.txt").write_text(
                    f"engine: podman, API service at {service.docker_host}\nimage: {BUILT_IMAGE}\n"
                    f"image build (script run) {seconds:.1f} s: {note}\n")
                yield engine
            finally:
                service.stop()
                shutil.copy(service.log, artifact_dir() / "podman-service.log")
        elif _docker_answers():
            yield ContainerEngine(os.environ.get("DOCKER_HOST"), os.environ.get("TRITON_READY_TEST_IMAGE", OFFICIAL_IMAGE),
                                  "docker", os.environ.get("TRITON_READY_TEST_ULIMITS"))
        else:
            pytest.skip("no container engine here: neither podman (.ci/run installs podman, runc and debootstrap) "
                        "nor a Docker engine that answers")
