"""The deployment's limits the container launcher runs the server inside (deployment/pod_limits.py,
launchers/container_spec.py): read from Triton's own charts, KServe's runtime and the broken twins."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_triton_ready.deployment.manifest import read_manifest
from pytest_triton_ready.deployment.pod_limits import RUNTIME_SHM_BYTES, pod_limits
from pytest_triton_ready.launchers import LaunchError
from pytest_triton_ready.launchers.container_spec import container_spec
from pytest_triton_ready.launchers.docker_engine import killed_for_memory, memory_events
from pytest_triton_ready.settings import build_settings

DATA = Path(__file__).resolve().parent / "data" / "deployments"
MIB = 2**20
PORTS = {8000: 18000, 8001: 18001, 8002: 18002}


def limits(name: str):
    return pod_limits(read_manifest(DATA / name, "1.25.0"))


def spec(tmp_path: Path, manifest: Path | str, **cli):
    path = manifest if isinstance(manifest, Path) else DATA / manifest
    settings = build_settings({"triton_image": "nvcr.io/nvidia/tritonserver:24.10-py3", "triton_deployment": str(path),
                               "triton_kubernetes_version": "1.25.0", **cli}, {}, {})
    return container_spec(settings, host_ports=PORTS)


def test_the_k8s_onprem_chart_has_no_memory_or_cpu_limit_and_the_runtimes_64_mib_dev_shm():
    pod = limits("k8s-onprem.yaml")
    assert (pod.memory_bytes, pod.cpus, pod.shm_bytes) == (None, None, RUNTIME_SHM_BYTES)
    assert pod.flags == () and pod.environment == {}
    assert pod.left_out == ("--model-repository=/models: the launcher serves the run's repository on its own ports",)
    assert pod.origins["shm"].startswith("no memory-backed volume at /dev/shm in spec.template.spec.containers[0]")
    assert pod.describe() == ("no memory limit, no CPU limit, /dev/shm 64 MiB (from "
                              f"{DATA / 'k8s-onprem.yaml'} document 0: spec.template.spec.containers[0])")


def test_the_aws_chart_keeps_its_poll_mode_and_names_the_secrets_it_cannot_resolve():
    pod = limits("aws.yaml")
    assert pod.flags == ("--model-control-mode=poll", "--repository-poll-secs=5")
    assert any(line.startswith("env AWS_DEFAULT_REGION: valueFrom (secretKeyRef)") for line in pod.left_out)
    assert any(line.startswith("--model-store=s3://") for line in pod.left_out)


def test_kserves_runtime_flags_without_the_ports_the_launcher_maps(tmp_path):
    kserve = DATA / "kserve"
    rendered = tmp_path / "rendered.yaml"
    rendered.write_text((kserve / "kserve-tritonserver.yaml").read_text() + "\n---\n"
                        + (kserve / "bert_v1beta1.yaml").read_text())
    pod = pod_limits(read_manifest(rendered, "1.30.0"))
    assert pod.flags == ("--allow-grpc=true", "--allow-http=true")
    assert [line.split(":", 1)[0] for line in pod.left_out] == ["--model-store=/mnt/models", "--grpc-port=9000",
                                                                "--http-port=8080"]


def test_a_memory_limit_below_the_peak_is_the_containers_limit_without_swap(tmp_path):
    pod = limits("broken/memory-limit-below-peak.yaml")
    assert pod.memory_bytes == 64 * MIB
    assert pod.origins["memory"] == "spec.template.spec.containers[0].resources.limits.memory"
    kwargs = spec(tmp_path, "broken/memory-limit-below-peak.yaml", triton_gpus="none").run_kwargs()
    assert kwargs["mem_limit"] == kwargs["memswap_limit"] == 64 * MIB


def _manifest(tmp_path: Path, resources: str, volumes: str = "", mounts: str = "", args: str = "") -> Path:
    path = tmp_path / "deployment.yaml"
    path.write_text(f"""\
apiVersion: apps/v1
kind: Deployment
metadata: {{name: triton}}
spec:
  selector: {{matchLabels: {{app: triton}}}}
  template:
    metadata: {{labels: {{app: triton}}}}
    spec:
      volumes: [{volumes}]
      containers:
        - name: triton
          image: nvcr.io/nvidia/tritonserver:24.10-py3
          args: ["tritonserver", "--model-repository=/models"{args}]
          env: [{{name: OMP_NUM_THREADS, value: "2"}}]
          volumeMounts: [{mounts}]
          resources: {resources}
""")
    return path


def test_cpu_memory_shm_environment_and_flags_reach_the_container(tmp_path):
    manifest = _manifest(tmp_path, "{limits: {cpu: 1500m, memory: 2Gi}}",
                         volumes="{name: dshm, emptyDir: {medium: Memory, sizeLimit: 256Mi}}",
                         mounts="{name: dshm, mountPath: /dev/shm}", args=', "--exit-timeout-secs=45"')
    built = spec(tmp_path, manifest, triton_gpus="none")
    kwargs = built.run_kwargs()
    assert kwargs["nano_cpus"] == 1_500_000_000 and kwargs["mem_limit"] == 2 * 2**30
    assert kwargs["shm_size"] == str(256 * MIB)
    assert built.environment == {"OMP_NUM_THREADS": "2"}
    assert built.command[-1] == "--exit-timeout-secs=45"  # after the launcher's own, so it wins
    assert "--model-repository=/models" in built.command and "--load-model=*" in built.command


def test_a_memory_backed_dev_shm_without_a_size_is_bounded_by_the_memory_limit(tmp_path):
    manifest = _manifest(tmp_path, "{limits: {memory: 1Gi}}", volumes="{name: dshm, emptyDir: {medium: Memory}}",
                         mounts="{name: dshm, mountPath: /dev/shm}")
    assert pod_limits(read_manifest(manifest, "1.25.0")).shm_bytes == 2**30


def test_another_model_control_mode_drops_the_launchers_load_model(tmp_path):
    manifest = _manifest(tmp_path, "{}", args=', "--model-control-mode=poll"')
    command = spec(tmp_path, manifest, triton_gpus="none").command
    assert "--load-model=*" not in command and command[-1] == "--model-control-mode=poll"


def test_an_unreadable_deployment_is_one_launch_error_naming_the_option(tmp_path):
    broken = tmp_path / "broken.yaml"
    broken.write_text("kind: [")
    with pytest.raises(LaunchError, match=r"^--triton-deployment from .*broken.yaml: cannot read"):
        spec(tmp_path, broken)


def test_an_oom_kill_names_the_kills_the_limit_its_field_the_peak_and_the_exit_code(tmp_path):
    built = spec(tmp_path, "broken/memory-limit-below-peak.yaml", triton_gpus="none")
    line = killed_for_memory(2, 137, built, 64 * MIB, "during start-up")
    assert line.startswith("the kernel OOM-killed 2 processes of the tritonserver container during start-up at its "
                           "memory limit 64 MiB (spec.template.spec.containers[0].resources.limits.memory in "
                           f"{DATA / 'broken' / 'memory-limit-below-peak.yaml'} document 0); the most it used: 64 MiB; "
                           "the container then ended with exit code 137 (OOMKilled"), line


@pytest.mark.parametrize("output, expected", [
    # cgroup v1 (recorded from podman with runc on this machine: two stubs killed at 64 MiB)
    ("oom_kill_disable 0\nunder_oom 0\noom_kill 2\npeak 67108864\n", (2, 67108864.0)),
    # cgroup v2
    ("low 0\nhigh 0\nmax 12\noom 1\noom_kill 1\noom_group_kill 0\npeak 1048576\n", (1, 1048576.0)),
    ("oom_kill_disable 0\nunder_oom 0\npeak \n", None),  # an older kernel without the counter
])
def test_the_containers_oom_kill_count_and_peak_from_its_cgroup(output, expected):
    assert memory_events(output) == expected
