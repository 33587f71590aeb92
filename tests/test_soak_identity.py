"""The soak's server identity: file digests of every model the server holds, the launch, the rates,
and each difference named. Unit tests on real files in a copy of the demo repository; the server
answers are the ones Triton 2.51 gave for it (repository index, model config)."""

from __future__ import annotations

import hashlib
import os
import shutil

import pytest

from pytest_triton_ready.launchers import stable_arguments
from pytest_triton_ready.launchers.attach import AttachLauncher
from pytest_triton_ready.launchers.container import ContainerLauncher
from pytest_triton_ready.launchers.embedded import DEMO_REPOSITORY, EmbeddedLauncher
from pytest_triton_ready.settings import build_settings
from pytest_triton_ready.soak import model_files as files_module
from pytest_triton_ready.soak.identity import config_digest, differences, identity_of, server_identity
from pytest_triton_ready.soak.model_files import file_digest, model_files

RATES = {"scale": 20.0, "cached_sum": 20.0}
LAUNCH = {"launcher": "embedded", "image": None, "arguments": ["tritonserver", "--log-verbose=0"]}
# POST /v2/repository/index of the demo server plus a decoupled model and a model that failed to parse
INDEX = [{"name": "accumulate", "version": "1", "state": "READY"},
         {"name": "cached_sum", "version": "1", "state": "READY"},
         {"name": "generate", "version": "1", "state": "READY"},
         {"name": "scale", "version": "1", "state": "READY"},
         {"name": "broken"}]
CONFIGS = {"scale": {"name": "scale", "backend": "python", "max_batch_size": 8},
           "cached_sum": {"name": "cached_sum", "backend": "python", "max_batch_size": 8},
           "accumulate": {"name": "accumulate", "backend": "python", "sequence_batching": {}},
           "generate": {"name": "generate", "backend": "python", "model_transaction_policy": {"decoupled": True}}}


class _Recorded:
    def __init__(self, index=INDEX):
        self.index = index

    def server_metadata(self):
        return {"name": "triton", "version": "2.51.0"}

    def repository_index(self):
        return self.index

    def model_config(self, model):
        return CONFIGS[model]


@pytest.fixture
def repository(tmp_path):
    """A copy of the demo repository with the streaming demo model next to the others."""
    copy = tmp_path / "models"
    shutil.copytree(DEMO_REPOSITORY, copy, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(DEMO_REPOSITORY.parent / "streaming" / "generate", copy / "generate",
                    ignore=shutil.ignore_patterns("__pycache__"))
    return copy


def _identity(repository, rates=RATES, launch=LAUNCH, client=None):
    return server_identity(client or _Recorded(), repository, None, launch, rates)


def test_the_identity_holds_every_model_the_server_holds_decoupled_and_unready_ones_too(repository):
    identity = _identity(repository)
    assert set(identity["models"]) == {"accumulate", "cached_sum", "generate", "scale", "broken"}
    assert identity["models"]["broken"] == {"ready_versions": []}
    scale = identity["models"]["scale"]
    assert scale["config_sha256"] == config_digest(CONFIGS["scale"])
    assert set(scale["files"]) == {"config.pbtxt", "1/model.py"}
    assert set(identity["models"]["generate"]["files"]) == {"config.pbtxt", "1/model.py"}
    assert identity["server_version"] == "2.51.0" and identity["soak_rates_infer_s"] == RATES
    assert identity["launch"] == LAUNCH and differences(identity, _identity(repository)) == []


def test_a_changed_model_py_is_named_with_both_digests(repository):
    then = _identity(repository)
    with open(repository / "scale" / "1" / "model.py", "a") as handle:
        handle.write("# scaled differently\n")
    here = _identity(repository)
    was, now = then["models"]["scale"]["files"]["1/model.py"], here["models"]["scale"]["files"]["1/model.py"]
    assert differences(then, here) == [
        f"model scale: file 1/model.py changed (digest sha256:{was[7:19]} there, sha256:{now[7:19]} here)"]


def test_new_and_removed_files_under_a_served_version_are_named(repository):
    then = _identity(repository)
    (repository / "cached_sum" / "1" / "weights.bin").write_bytes(b"\x00" * 10)
    (repository / "generate" / "1" / "model.py").unlink()
    assert differences(then, _identity(repository)) == [
        "model cached_sum: file 1/weights.bin added (not in the evidence)",
        "model generate: file 1/model.py removed (in the evidence, not here)"]


def test_unserved_versions_and_bytecode_caches_are_not_part_of_a_model(repository):
    then = _identity(repository)
    (repository / "scale" / "2").mkdir()
    (repository / "scale" / "2" / "model.py").write_text("# not served\n")
    (repository / "scale" / "1" / "__pycache__").mkdir()
    (repository / "scale" / "1" / "__pycache__" / "model.cpython-312.pyc").write_bytes(b"\x01")
    assert differences(then, _identity(repository)) == []
    assert set(model_files(repository / "scale", ["1", "2"])) == {"config.pbtxt", "1/model.py", "2/model.py"}


def test_a_large_file_is_digested_by_size_mtime_and_samples(tmp_path, monkeypatch):
    monkeypatch.setattr(files_module, "LARGE_FILE_BYTES", 64 * 1024)
    monkeypatch.setattr(files_module, "SAMPLE_BYTES", 1024)
    weights = tmp_path / "weights.bin"
    weights.write_bytes(bytes(range(256)) * 1024)  # 256 KiB
    first = file_digest(weights)
    assert first.startswith("sampled:")
    stat = weights.stat()
    with open(weights, "r+b") as handle:  # a byte inside the middle sample
        handle.seek((stat.st_size - 1024) // 2 + 10)
        handle.write(b"\xff")
    os.utime(weights, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    changed = file_digest(weights)
    assert changed != first
    os.utime(weights, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1))  # touched: same bytes, another time
    assert file_digest(weights) not in (first, changed)
    small = tmp_path / "small.bin"
    small.write_bytes(b"x" * 1000)
    assert file_digest(small) == "sha256:" + hashlib.sha256(b"x" * 1000).hexdigest()


def test_files_that_cannot_be_read_are_a_difference_never_a_silent_match(repository):
    unread = "the attach server's model repository is not on this host (give --triton-model-repository=DIR where it is)"
    attached = server_identity(_Recorded(), None, unread, None, RATES)
    assert attached["models"]["scale"] == {"ready_versions": ["1"], "config_sha256": config_digest(CONFIGS["scale"]),
                                           "files": None, "files_unread": unread}
    assert differences(attached, attached) == [  # one line per reason, naming every model it concerns
        f"models accumulate, cached_sum, generate, scale: its files cannot be compared: they were not read there "
        f"({unread})"]
    launched = _identity(repository, launch=None)
    assert differences(launched, attached) == [
        f"models accumulate, cached_sum, generate, scale: its files cannot be compared: they were not read here "
        f"({unread})"]
    shutil.rmtree(repository / "cached_sum" / "1")
    missing = _identity(repository, launch=None)["models"]["cached_sum"]
    assert missing["files"] is None and missing["files_unread"].endswith("no such directory (version 1 is READY)")


def test_launch_arguments_and_image_are_compared_where_known(repository):
    then = _identity(repository, launch={"launcher": "container", "image": "tritonserver:24.10-py3",
                                         "arguments": ["tritonserver", "--log-verbose=0"]})
    here = _identity(repository, launch={"launcher": "container", "image": "tritonserver:24.11-py3",
                                         "arguments": ["tritonserver", "--log-verbose=1", "--pinned-memory-pool-byte-size=0"]})
    assert differences(then, here) == [
        "image tritonserver:24.10-py3 there, tritonserver:24.11-py3 here",
        "launch arguments differ: --log-verbose=0 only there, --log-verbose=1 --pinned-memory-pool-byte-size=0 only here"]
    assert differences(then, _identity(repository, launch=None)) == [
        "launch arguments: known there (container server), not here (attached server), so the two launches "
        "cannot be compared"]


def test_evidence_soaked_below_this_runs_planned_rate_is_refused_naming_both_rates(repository):
    then = _identity(repository, rates={"scale": 35.5, "cached_sum": 80.0})
    here = _identity(repository, rates={"scale": 42.25, "cached_sum": 80.0, "accumulate": 5.0})
    assert differences(then, here) == [
        "model accumulate: not soaked there, this run plans 5 infer/s",
        "model scale: soaked at 35.5 infer/s there, below this run's planned soak rate of 42.25 infer/s"]
    assert differences(here, then) == []  # a harder soak stands for a lighter one


def test_each_launcher_declares_how_it_started_the_server_without_its_ports():
    assert stable_arguments(["/opt/tritonserver/bin/tritonserver", "--model-repository=/models", "--http-port",
                             "8000", "--grpc-port=8001", "--log-verbose=0"]) == ["tritonserver", "--log-verbose=0"]
    embedded, other = EmbeddedLauncher(extra_args=["--log-verbose=1"]), EmbeddedLauncher(extra_args=["--log-verbose=1"])
    try:
        assert embedded.launch_identity == other.launch_identity  # other ports, other working directory
        assert embedded.launch_identity["arguments"][-1] == "--log-verbose=1"
        assert not any("port" in a or "repository" in a for a in embedded.launch_identity["arguments"])
    finally:
        embedded.cleanup()
        other.cleanup()
    settings = build_settings({"triton_image": "nvcr.io/nvidia/tritonserver:24.10-py3", "triton_gpus": "none"}, {}, {})
    container = ContainerLauncher(settings)
    try:
        assert container.launch_identity["image"] == "nvcr.io/nvidia/tritonserver:24.10-py3"
        assert container.launch_identity["arguments"][0] == "tritonserver"
    finally:
        container.cleanup()
    assert AttachLauncher(build_settings({"triton_url": "http://10.0.0.5:8000"}, {}, {})).launch_identity is None


def test_an_attached_server_is_digested_from_the_repository_given(repository):
    class _Target:
        launcher = AttachLauncher(build_settings({"triton_url": "http://10.0.0.5:8000"}, {}, {}))
        client = _Recorded()

    given = build_settings({"triton_url": "http://10.0.0.5:8000", "triton_model_repository": repository}, {}, {})
    assert set(identity_of(_Target(), given, RATES)["models"]["scale"]["files"]) == {"config.pbtxt", "1/model.py"}
    none = build_settings({"triton_url": "http://10.0.0.5:8000"}, {}, {})
    assert "give --triton-model-repository=DIR" in identity_of(_Target(), none, RATES)["models"]["scale"]["files_unread"]
