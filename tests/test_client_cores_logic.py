"""How many cores the load engine's worker processes may take (load/workers.py): the CPU affinity,
a cgroup's CPU quota (a pod's CPU limit), and whether the server shares the host (no server)."""

import os
import socket

import pytest

from pytest_triton_ready.load import workers
from pytest_triton_ready.load.workers import auto_workers, cgroup_cpu_quota, on_this_host, spare_cores, usable_cores


def membership(tmp_path, text: str) -> str:
    path = tmp_path / "cgroup"
    path.write_text(text)
    return str(path)


def test_a_cgroup_v2_quota_is_read_in_the_process_own_cgroup(tmp_path):
    own = tmp_path / "fs" / "kubepods" / "pod1"
    own.mkdir(parents=True)
    (own / "cpu.max").write_text("150000 100000\n")
    (tmp_path / "fs" / "cpu.max").write_text("max 100000\n")
    assert cgroup_cpu_quota(str(tmp_path / "fs"), membership(tmp_path, "0::/kubepods/pod1\n")) == 1.5


def test_a_cgroup_v2_without_a_limit_says_max(tmp_path):
    (tmp_path / "cpu.max").write_text("max 100000\n")
    assert cgroup_cpu_quota(str(tmp_path), membership(tmp_path, "0::/\n")) is None


def test_a_container_sees_its_own_cgroup_at_the_root(tmp_path):
    (tmp_path / "cpu.max").write_text("300000 100000\n")  # the path in /proc/self/cgroup is the host's
    assert cgroup_cpu_quota(str(tmp_path), membership(tmp_path, "0::/docker/abc\n")) == 3.0


def test_a_cgroup_v1_quota_and_its_absence(tmp_path):
    cpu = tmp_path / "cpu,cpuacct"
    cpu.mkdir()
    (cpu / "cpu.cfs_period_us").write_text("100000\n")
    (cpu / "cpu.cfs_quota_us").write_text("250000\n")
    groups = membership(tmp_path, "2:cpu,cpuacct:/\n1:memory:/x\n")
    assert cgroup_cpu_quota(str(tmp_path), groups) == 2.5
    (cpu / "cpu.cfs_quota_us").write_text("-1\n")
    assert cgroup_cpu_quota(str(tmp_path), groups) is None


def test_no_cgroup_files_mean_no_limit(tmp_path):
    assert cgroup_cpu_quota(str(tmp_path), str(tmp_path / "absent")) is None


def test_the_usable_cores_are_the_affinity_lowered_to_the_quota_rounded_up(monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2, 3, 4, 5}, raising=False)
    monkeypatch.setattr(workers, "cgroup_cpu_quota", lambda root="": None)
    assert usable_cores() == 6
    monkeypatch.setattr(workers, "cgroup_cpu_quota", lambda root="": 2.5)
    assert usable_cores() == 3
    monkeypatch.setattr(workers, "cgroup_cpu_quota", lambda root="": 0.2)
    assert usable_cores() == 1


def test_spare_cores_leave_the_server_half_on_a_shared_host_and_the_parent_one_elsewhere():
    assert [spare_cores(n, True) for n in (1, 2, 3, 16)] == [1, 1, 1, 8]
    assert [spare_cores(n, False) for n in (1, 2, 3, 16)] == [1, 1, 2, 15]


def test_workers_follow_the_load_within_the_spare_cores():
    assert auto_workers(16, cores=16, server_here=False) == 1
    assert auto_workers(256, cores=16, server_here=True) == 8
    assert auto_workers(256, cores=16, server_here=False) == 8
    assert auto_workers(1024, cores=16, server_here=False) == 15
    assert auto_workers(None, 20_000, cores=16, server_here=False) == 5
    assert auto_workers(256, cores=2, server_here=True) == 1


@pytest.mark.parametrize(("target", "here"), [
    ("127.0.0.1:8001", True), ("localhost:8001", True), ("[::1]:8001", True), ("http://127.0.0.2:8000", True),
    ("http://localhost:8000", True), (None, True), ("triton.example:8001", False),
    ("https://10.0.0.5:8000", False), (f"{socket.gethostname()}:8001", True),
])
def test_a_server_on_this_host_is_known_by_its_address(target, here):
    assert on_this_host(target) is here
