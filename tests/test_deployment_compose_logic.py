"""Docker Compose files read as the deployment: a compose file from the field (tests/data/deployments/
compose, its source in the data's README) and its broken twins, judged by the same rules as a
Kubernetes Deployment against the measurements the Kubernetes and KServe tests hold them to; what
compose has no equivalent of is NOT APPLICABLE, saying why; a malformed file is one line naming
file and field."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from test_deployment_rules_logic import MEASURED, ONPREM, RULES, _recorder, judge_all

from pytest_triton_ready.deployment.compose_values import compose_bytes, compose_seconds
from pytest_triton_ready.deployment.judgement import FAIL, INCOMPLETE, NOT_APPLICABLE, PASS, Measured
from pytest_triton_ready.deployment.manifest import read_manifest
from pytest_triton_ready.deployment.posture import hpa_metrics, rollout_capacity
from pytest_triton_ready.deployment.reading import DeploymentError, is_triton
from pytest_triton_ready.deployment.recording import record

COMPOSE = Path(__file__).parent / "data" / "deployments" / "compose"
FIELD = COMPOSE / "quickstart.yaml"
TRITON = {"image": "nvcr.io/nvidia/tritonserver:24.09-py3", "command": "tritonserver --model-repository=/models"}
NOT_APPLICABLE_RULES = {"liveness-path": "a liveness probe", "pre-stop-delay": "a preStop delay",
                        "hpa-metrics": "an autoscaler", "replicas-and-disruption-budget": "a PodDisruptionBudget",
                        "rollout-capacity": "a rolling update"}


def _compose(tmp_path: Path, services: dict, name: str = "compose.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump({"services": services}))
    return path


def _triton(tmp_path: Path, measured: Measured = MEASURED, **service) -> dict:
    return judge_all(_compose(tmp_path, {"triton": {**TRITON, **service}}), measured)


def test_the_field_file_is_one_triton_container_read_without_kubernetes_schemas(tmp_path):
    (container,) = read_manifest(FIELD, "1.30.0").containers
    assert container.source == "Compose" and container.field_prefix == "services.server"
    assert container.document.kind == "" and container.args == ["tritonserver", "--model-repository=/models"]
    assert container.container["resources"] == {"limits": {"nvidia.com/gpu": 1}, "requests": {}}
    folder = tmp_path / "deployment"
    folder.mkdir()
    (folder / "compose.yaml").write_text(FIELD.read_text())
    (folder / "rendered.yaml").write_text(ONPREM.read_text())
    both = read_manifest(folder, "1.25.0")  # the chart's HPA is validated, the compose file is not
    assert [c.source for c in both.containers] == ["Kubernetes", "Compose"]
    with pytest.raises(DeploymentError, match=r"rendered\.yaml document 1 \(HorizontalPodAutoscaler\)"):
        read_manifest(folder, "1.30.0")


def test_the_field_file_is_judged_on_every_rule_with_the_recorded_measurements():
    judged = judge_all(FIELD)
    assert set(judged) == RULES
    assert {rule: j.verdict for rule, j in judged.items()} == {
        "liveness-path": NOT_APPLICABLE, "readiness-path": FAIL, "startup-budget": PASS, "grace-period-drain": PASS,
        "grace-period-exit-timeout": FAIL, "pre-stop-delay": NOT_APPLICABLE, "memory-limit": FAIL,
        "memory-time-to-limit": INCOMPLETE, "memory-request": PASS, "cpu-limit": PASS, "dev-shm": FAIL,
        "gpu-limit": PASS, "hpa-metrics": NOT_APPLICABLE, "image-pinned": PASS, "run-as-non-root": FAIL,
        "model-repository-read-only": FAIL, "replicas-and-disruption-budget": NOT_APPLICABLE,
        "model-control-mode": PASS, "restricted-apis": FAIL, "rollout-capacity": NOT_APPLICABLE}
    assert all(j.file == f"{FIELD} document 0" and j.field.startswith("services.server") for j in judged.values())
    ready = judged["readiness-path"]  # the Quickstart's curl -v: it passes on any HTTP answer, 400 included
    assert ready.field == "services.server.healthcheck.test"
    assert ready.message.startswith("the healthcheck asks /v2/health/ready (curl without --fail: any HTTP answer "
                                    "passes), the rule is /v2/health/ready")
    assert "Docker marks the container unhealthy 50 s (interval x retries)" in ready.message
    assert ready.fix.startswith("healthcheck.test: [CMD, curl, --fail, -sS, http://localhost:8000/v2/health/ready]")
    start = judged["startup-budget"]
    assert start.field == "services.server.healthcheck" and start.manifest_value == 50
    assert "healthcheck: start_period 0 s + retries 5 x interval 10 s = 50 s; measured start-to-ready 4.2 s" in \
        start.message
    grace = judged["grace-period-exit-timeout"]  # compose's 10 s default against Triton's 30 s exit timeout
    assert grace.field == "services.server.stop_grace_period" and grace.manifest_value == 10
    assert grace.message == ("stop_grace_period 10 s (Compose's default); --exit-timeout-secs 30 s (Triton default), "
                             "the rule is more than that")
    assert grace.fix.startswith("stop_grace_period: 35s, or a lower --exit-timeout-secs")
    memory = judged["memory-limit"]
    assert memory.field == "services.server.deploy.resources.limits.memory"
    assert memory.fix.startswith("deploy.resources.limits.memory: 721m or more")
    shm = judged["dev-shm"]
    assert shm.field == "services.server.shm_size"
    assert shm.message == "python backend models (scale) and no shm_size: /dev/shm is Docker's default, 64 MiB"
    gpu = judged["gpu-limit"]
    assert gpu.field == "services.server.deploy.resources.reservations.devices[0]" and gpu.manifest_value == 1
    assert judged["run-as-non-root"].message == "no user: the container runs as its image's user, root in Triton's images"
    repository = judged["model-repository-read-only"]
    assert repository.field == "services.server.volumes[0]" and repository.fix.startswith("volumes[0]: end it with :ro")
    assert judged["model-control-mode"].field == "services.server.command"


@pytest.mark.parametrize(("twin", "rule", "field", "words"), [
    ("healthcheck-on-live", "readiness-path", "services.server.healthcheck.test",
     "the healthcheck asks /v2/health/live, the rule is /v2/health/ready"),
    ("short-healthcheck-budget", "startup-budget", "services.server.healthcheck",
     "healthcheck: start_period 0 s + retries 1 x interval 1 s = 1 s; measured start-to-ready 4.2 s"),
    ("short-stop-grace-period", "grace-period-drain", "services.server.stop_grace_period",
     "stop_grace_period 1 s; measured drain 1.3 s + margin 5 s = 6.3 s needed"),
    ("memory-limit-below-peak", "memory-limit", "services.server.deploy.resources.limits.memory",
     "limit 0.06 GiB; measured peak 0.59 GiB"),
    ("shm-size-below-minimum", "dev-shm", "services.server.shm_size",
     "/dev/shm is volume 'shm_size': medium Memory, sizeLimit 32 MiB; python backend models: scale"),
    ("gpu-models-without-gpu-reservation", "gpu-limit", "services.server.deploy.resources.reservations.devices",
     "GPUs reserved: none; KIND_GPU models and the GPUs they reference: scale_gpu (1)"),
    ("poll-mode", "model-control-mode", "services.server.command", "--model-control-mode=poll"),
])
def test_each_broken_twin_fails_its_rule_naming_file_and_field(twin, rule, field, words):
    path = COMPOSE / "broken" / f"{twin}.yaml"
    judged = judge_all(path)[rule]
    assert judged.verdict == FAIL, judged
    assert judged.file == f"{path} document 0" and judged.field == field
    assert words in judged.message and judged.fix
    original = judge_all(FIELD)[rule]  # the field file passes, or fails the rule for its own reason
    assert original.verdict == PASS or original.message != judged.message


def test_the_twins_fixes_name_the_compose_field_and_value():
    fixes = {twin: judge_all(COMPOSE / "broken" / f"{twin}.yaml")[rule].fix for twin, rule in [
        ("short-healthcheck-budget", "startup-budget"), ("short-stop-grace-period", "grace-period-drain"),
        ("shm-size-below-minimum", "dev-shm"), ("gpu-models-without-gpu-reservation", "gpu-limit")]}
    assert fixes["short-healthcheck-budget"].startswith("healthcheck.start_period: 7s or more")
    assert fixes["short-stop-grace-period"].startswith("stop_grace_period: 7s, so Docker does not SIGKILL")
    assert fixes["shm-size-below-minimum"].startswith("shm_size: 64m or more (or ipc: host)")
    assert fixes["gpu-models-without-gpu-reservation"].startswith(
        "deploy.resources.reservations.devices: [{driver: nvidia, count: 1, capabilities: [gpu]}]")


def test_what_compose_has_no_equivalent_of_is_not_applicable_saying_why():
    judged = judge_all(FIELD, Measured(refused_after_sigterm=12, replica_capacity={"scale": 10.0},
                                       required_at_peak={"scale": 1000.0}, exported_metrics=frozenset()))
    for rule, lacked in NOT_APPLICABLE_RULES.items():
        assert judged[rule].verdict == NOT_APPLICABLE, rule
        assert judged[rule].message.startswith(f"Compose has no equivalent of {lacked}: "), rule
        assert judged[rule].fix is None and judged[rule].manifest_value is None
    assert "Docker restarts no container for failing it" in judged["liveness-path"].message
    assert "deploy.update_config is read by Docker Swarm, not by docker compose" in judged["rollout-capacity"].message
    manifest = read_manifest(FIELD, "1.30.0")
    for judge, reason in [(lambda c: [rollout_capacity(manifest, c, MEASURED)], "a rolling update"),
                          (lambda c: hpa_metrics(manifest, c, MEASURED), "an autoscaler")]:
        check = _recorder()
        with pytest.raises(pytest.skip.Exception, match="not applicable"):
            record(check, [j for c in manifest.containers for j in judge(c)])
        assert check.result.reason.startswith(f"Compose has no equivalent of {reason}: ")
        assert not check.result.recommendations


def test_a_malformed_compose_file_is_one_line_naming_file_and_field(tmp_path):
    path = _compose(tmp_path, {"triton": {**TRITON, "deploy": {"resources": {"limits": {"memory": "lots"}}}}})
    with pytest.raises(DeploymentError) as error:
        read_manifest(path, "1.30.0")
    assert str(error.value) == (f'{path} (compose): field services.triton.deploy.resources.limits.memory: "lots" is '
                                "not a size (a number of bytes, or one with a unit: 512m, 4g, 1.5gb)")
    for service, words in [
        ({"stop_grace_period": 90}, "field services.triton.stop_grace_period: 90 is not a duration"),
        ({"healthcheck": {"test": ["CMD", "curl"], "retries": "three"}}, 'healthcheck.retries: "three" is not a whole'),
        ({"healthcheck": {"test": ["curl", "-f", "localhost:8000/v2/health/ready"]}}, "does not start with CMD"),
        ({"mem_limit": "${TRITON_MEMORY}"}, "an unresolved variable: give --triton-deployment the output of `docker "
                                            "compose config`"),
        ({"mem_limit": "4g", "deploy": {"resources": {"limits": {"memory": "2g"}}}},
         'field services.triton.mem_limit: "4g" differs from services.triton.deploy.resources.limits.memory ("2g")'),
        ({"deploy": {"resources": {"reservations": {"devices": [{"capabilities": ["gpu"], "count": 1,
                                                                  "device_ids": ["0"]}]}}}},
         "field services.triton.deploy.resources.reservations.devices[0]: "),
        ({"volumes": [8000]}, "field services.triton.volumes[0]: 8000 is not a volume"),
        ({"cpus": "many"}, 'field services.triton.cpus: "many" is not a number'),
        ({"user": ["1000"]}, "field services.triton.user: "),
    ]:
        with pytest.raises(DeploymentError) as error:
            read_manifest(_compose(tmp_path, {"triton": {**TRITON, **service}}), "1.30.0")
        assert words in str(error.value) and str(error.value).startswith(f"{tmp_path / 'compose.yaml'} (compose): ")
        assert "\n" not in str(error.value)
    with pytest.raises(DeploymentError, match=r"field services: \[\"triton\"\] is not a mapping"):
        read_manifest(_compose(tmp_path, ["triton"]), "1.30.0")


def test_compose_sizes_and_durations():
    assert [compose_bytes(v) for v in ("4g", "512m", "1.5gb", "2GiB", "100", 1073741824, "64 MB")] == [
        4 * 2**30, 512 * 2**20, int(1.5 * 2**30), 2 * 2**30, 100, 2**30, 64 * 2**20]
    assert [compose_seconds(v) for v in ("1m30s", "90s", "500ms", "1h", "0", "1.5s")] == [90, 90, 0.5, 3600, 0, 1.5]
    for size in ("lots", "4 gigs", True, "-1g"):
        with pytest.raises(ValueError):
            compose_bytes(size)
    for duration in (90, "90", "1d", "soon", None):
        with pytest.raises(ValueError):
            compose_seconds(duration)


def test_a_client_sdk_image_or_a_host_named_tritonserver_is_not_a_server(tmp_path):
    earlier = yaml.safe_load(FIELD.read_text())  # the server beside a client on the SDK image, as compose files put it
    services = {"client": {"image": "nvcr.io/nvidia/tritonserver:24.09-py3-sdk"}, **earlier["services"],
                "perf": {"image": "nvcr.io/nvidia/tritonserver:24.09-py3-sdk",
                         "command": "perf_analyzer -m densenet_onnx -u server:8001 --service-kind=triton"},
                "app": {"image": "python:3.12", "command": ["python", "app.py", "--url", "tritonserver:8001"]}}
    assert [c.field_prefix for c in read_manifest(_compose(tmp_path, services), "1.30.0").containers] == [
        "services.server"]
    with pytest.raises(DeploymentError, match=r"no Triton container .* or compose service; the documents are: "
                                              r"compose file"):
        read_manifest(_compose(tmp_path, {"app": services["app"]}), "1.30.0")


def test_docker_compose_config_output_long_syntax_and_bytes(tmp_path):
    judged = _triton(tmp_path, Measured(peak_rss_bytes=600 * 2**20, python_models=("scale",),
                                        gpus_needed={"scale_gpu": 2}),
                     command=["tritonserver", "--model-repository=/models", "--exit-timeout-secs=20"],
                     volumes=[{"type": "bind", "source": "/srv/models", "target": "/models", "read_only": True}],
                     deploy={"resources": {"limits": {"memory": "1073741824", "cpus": 2.0},
                                           "reservations": {"devices": [{"capabilities": ["gpu"], "count": -1}]}}},
                     shm_size="1073741824", stop_grace_period="1m30s", user="1000:1000")
    assert judged["model-repository-read-only"].verdict == PASS
    assert judged["model-repository-read-only"].field == "services.triton.volumes[0].read_only"
    assert judged["memory-limit"].verdict == PASS and judged["memory-limit"].manifest_value == "1.00 GiB"
    assert judged["gpu-limit"].verdict == PASS and judged["gpu-limit"].message.startswith("GPUs reserved: all;")
    assert judged["dev-shm"].verdict == PASS and "sizeLimit 1024 MiB" in judged["dev-shm"].message
    assert judged["grace-period-exit-timeout"].verdict == PASS and judged["grace-period-exit-timeout"].manifest_value == 90
    assert judged["run-as-non-root"].verdict == PASS and judged["run-as-non-root"].message == "user 1000:1000"
    assert judged["cpu-limit"].field == "services.triton.deploy.resources.limits.cpus"


def test_service_level_settings_and_a_shell_command_are_named_where_they_are_written(tmp_path):
    judged = _triton(tmp_path, Measured(peak_rss_bytes=600 * 2**20, python_models=("scale",), gpus_needed={"g": 1},
                                        cpu_cores_at_capacity=0.72),
                     command=["bash", "-c", "tritonserver --model-repository=/models --model-control-mode=poll"],
                     mem_limit="64m", cpus="0.1", ipc="host", gpus="all", user="root")
    assert judged["model-control-mode"].verdict == FAIL and judged["model-control-mode"].field == "services.triton.command[2]"
    memory = judged["memory-limit"]
    assert memory.field == "services.triton.mem_limit" and memory.fix.startswith("mem_limit: 721m or more")
    cpu = judged["cpu-limit"]
    assert cpu.verdict == FAIL and cpu.field == "services.triton.cpus" and cpu.fix.startswith("cpus: 0.9 or more")
    assert judged["dev-shm"].verdict == PASS and judged["dev-shm"].field == "services.triton.ipc"
    assert judged["gpu-limit"].verdict == PASS and judged["gpu-limit"].field == "services.triton.gpus"
    assert judged["run-as-non-root"].verdict == FAIL and judged["run-as-non-root"].message == "user root"
    assert judged["model-repository-read-only"].fix.startswith("mount the model repository from a volume, ending with :ro")


def test_the_nvidia_runtime_gives_the_gpus_nvidia_visible_devices_names(tmp_path):
    measured = Measured(gpus_needed={"vision": 2})
    assert _triton(tmp_path, measured, runtime="nvidia")["gpu-limit"].verdict == PASS  # the image's NVIDIA_VISIBLE_DEVICES=all
    one = _triton(tmp_path, measured, runtime="nvidia", environment=["NVIDIA_VISIBLE_DEVICES=0"])["gpu-limit"]
    assert one.verdict == FAIL and one.field == "services.triton.runtime" and one.manifest_value == 1
    none = _triton(tmp_path, measured, runtime="nvidia", environment={"NVIDIA_VISIBLE_DEVICES": "none"})["gpu-limit"]
    assert none.verdict == FAIL and none.message.startswith("GPUs reserved: 0;")


def test_a_built_image_is_not_applicable_and_a_disabled_healthcheck_is_none(tmp_path):
    path = _compose(tmp_path, {"triton": {"build": {"context": "./triton"}, "command": TRITON["command"],
                                          "healthcheck": {"disable": True}}})
    judged = judge_all(path)
    assert judged["image-pinned"].verdict == NOT_APPLICABLE and judged["image-pinned"].field == "services.triton.build"
    assert "only build: ./triton: what is pinned or not is the FROM line of its Dockerfile" in judged["image-pinned"].message
    assert judged["readiness-path"].verdict == FAIL and judged["readiness-path"].message.startswith("no healthcheck: ")
    assert judged["startup-budget"].verdict == FAIL and judged["startup-budget"].field == "services.triton.healthcheck"
    ready = _triton(tmp_path, healthcheck={"test": "curl -fsS localhost:8000/v2/health/ready || exit 1",
                                           "start_period": "2m", "retries": 3})
    assert ready["readiness-path"].verdict == PASS and ready["startup-budget"].manifest_value == 210


def test_a_word_that_runs_tritonserver_is_triton_a_host_name_or_the_sdk_image_is_not():
    assert is_triton({"command": ["/opt/tritonserver/bin/tritonserver", "--model-store=/models"]})
    assert is_triton({"args": ["-c", "cp a b && tritonserver --model-repository=/m"]})
    assert is_triton({"image": "nvcr.io/nvidia/tritonserver:24.09-py3"})
    assert not is_triton({"image": "nvcr.io/nvidia/tritonserver:24.09-py3-sdk", "args": ["perf_analyzer", "-m", "m"]})
    assert not is_triton({"image": "python:3.12", "args": ["--url=tritonserver:8001", "http://tritonserver:8000"]})


def test_the_unmeasured_and_request_fixes_are_in_compose_words(tmp_path):
    unmeasured = _triton(tmp_path, Measured())["memory-limit"]
    assert unmeasured.fix == "deploy.resources.limits.memory from a measured peak: run PERF-3's soak"
    request = _triton(tmp_path, mem_limit="1g", mem_reservation="2g")["memory-request"]
    assert request.verdict == FAIL and request.field == "services.triton.mem_reservation"
    assert request.fix.startswith("mem_reservation at most mem_limit")


def test_a_malformed_compose_file_stops_the_run_with_one_line_and_exit_code_4(tmp_path):
    path = _compose(tmp_path, {"triton": {**TRITON, "stop_grace_period": "soon"}}, "docker-compose.yml")
    result = subprocess.run([sys.executable, "-m", "pytest_triton_ready.cli", "--triton-url=http://127.0.0.1:1",
                             f"--triton-deployment={path}"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert result.returncode == 4, result.stdout[-2000:] + result.stderr[-2000:]
    lines = [line for line in result.stderr.splitlines() if "triton-ready:" in line]
    assert lines == [f"ERROR: triton-ready: --triton-deployment from cli: {path} (compose): field "
                     'services.triton.stop_grace_period: "soon" is not a duration (a number with a unit: 90s, 1m30s, '
                     "500ms)"]
