"""The config phase against a real server: the model-config lint (CFG-1), the version policy
(CFG-3) and the resource limits (CFG-4).

Each lint rule has a failing and a passing repository under tests/repositories/lint/<rule id>/
(bad/ and good/, with a triton-ready.yaml where the rule reads the YAML). They are linted through
pytester by the real checklist file, attached to the shared demo server. There is no GPU here, so
the GPU rules read a real H200 capture (tests/data/h200-triton-2.51) through the `gpu` fixture.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from conftest import CHECKS, TEST_REPOSITORIES
from pytest_triton_ready.config.resources import gpu_memory_use, gpus_over
from pytest_triton_ready.launchers.embedded import DEMO_REPOSITORY, EmbeddedLauncher
from pytest_triton_ready.lint import LintContext, lint
from pytest_triton_ready.lint.engine import RULES
from pytest_triton_ready.lint.model_memory import memory_by_gpu, memory_delta
from pytest_triton_ready.lint.modelconfig import ConfigSyntaxError, read_model_directory
from pytest_triton_ready.server.gpu import readings_from_metrics
from pytest_triton_ready.server.metrics import MetricsSnapshot

LINT_CASES = TEST_REPOSITORIES / "lint"
H200 = Path(__file__).parent / "data" / "h200-triton-2.51"  # real captures, kept in the repository
H200_UUID = "GPU-2ddddd50-82d1-88a5-57dc-504e56a02741"
LINT_CHECK = "test_model_configs_lint_clean"

# The GPU rules need GPU readings; the lint check reads them through the `gpu` fixture, which a
# conftest next to a copy of the checklist file replaces with a reader of the H200 capture.
H200_GPU_CONFTEST = f'''
import pytest
from pytest_triton_ready.server.gpu import GpuReader
from pytest_triton_ready.server.metrics import MetricsSnapshot

@pytest.fixture(scope="session")
def gpu():
    """The H200 capture's DCGM metrics, read through the real GpuReader (metrics path)."""
    snapshot = MetricsSnapshot.parse(open("{H200 / 'metrics_after.txt'}").read())
    return GpuReader(lambda: snapshot, same_host=False)
'''
GPU_RULES = {"gpu-instance-on-missing-gpu", "instance-count-for-model-size"}


def _findings(run, test_name: str, rule: str | None = None) -> list[dict]:
    return [f for f in run.result(test_name)["findings"] if rule is None or f["rule"] == rule]


@pytest.fixture
def h200_checklist(pytester):
    """checks/test_config.py copied next to a conftest whose `gpu` reads the H200 capture."""
    shutil.copy(CHECKS / "test_config.py", pytester.path / "test_config.py")
    (pytester.path / "conftest.py").write_text(H200_GPU_CONFTEST)
    return str(pytester.path / "test_config.py")


def _lint_run(run_checklist, h200_checklist, rule: str, kind: str, *extra: str, allow: str | None = "reload"):
    case = LINT_CASES / rule
    args = [f"--triton-model-repository={case / kind}", "-k", LINT_CHECK, *extra]
    if (case / "triton-ready.yaml").exists():
        args.append(f"--triton-config={case / 'triton-ready.yaml'}")
    checklist = h200_checklist if rule in GPU_RULES else "test_config.py"
    return run_checklist(checklist, args=tuple(args), allow=allow)


# -- every rule: a failing and a passing case, through the real check ---------------------------
FIRING = sorted(set(RULES) - {"instance-count-for-model-size"})  # needs a measured model: see below


def test_every_rule_has_a_failing_and_a_passing_repository():
    assert {p.name for p in LINT_CASES.iterdir()} == set(RULES)
    for rule in RULES:
        assert list((LINT_CASES / rule / "bad").glob("*/config.pbtxt"))
        assert list((LINT_CASES / rule / "good").glob("*/config.pbtxt"))


def test_docs_list_every_rule_with_its_id_and_severity():
    docs = (Path(__file__).resolve().parent.parent / "docs" / "config-rules.md").read_text()
    for rule in RULES.values():
        assert f"| `{rule.id}` | {rule.severity} |" in docs


@pytest.mark.parametrize("rule", FIRING)
def test_rule_fires_on_its_bad_case(run_checklist, h200_checklist, rule):
    run = _lint_run(run_checklist, h200_checklist, rule, "bad")
    found = _findings(run, LINT_CHECK, rule)
    assert found, f"{rule} did not fire: {_findings(run, LINT_CHECK)}"
    severity = RULES[rule].severity
    assert {f["severity"] for f in found} == {severity}
    for finding in found:
        assert finding["model"] and finding["value"] and rule in finding["message"]
    if severity == "error":
        run.outcome.assert_outcomes(failed=1)
        assert run.result(LINT_CHECK)["verdict"] == "fail"
        assert run.report["verdict"] != "READY"
    else:
        run.outcome.assert_outcomes(passed=1)


@pytest.mark.parametrize("rule", sorted(RULES))
def test_rule_stays_quiet_on_its_good_case(run_checklist, h200_checklist, rule):
    run = _lint_run(run_checklist, h200_checklist, rule, "good")
    run.outcome.assert_outcomes(passed=1)
    assert _findings(run, LINT_CHECK, rule) == []
    assert [f for f in _findings(run, LINT_CHECK) if f["severity"] != "info"] == []
    linted = [m for m in run.result(LINT_CHECK)["measurements"] if m["name"] == "models linted"]
    assert linted[0]["value"] >= 1


def test_a_rule_disabled_in_yaml_stays_quiet(run_checklist, h200_checklist, tmp_path):
    config = tmp_path / "triton-ready.yaml"
    config.write_text("lint:\n  disable: [dynamic-batching-without-max-batch-size]\n")
    run = _lint_run(run_checklist, h200_checklist, "dynamic-batching-without-max-batch-size", "bad",
                    f"--triton-config={config}")
    run.outcome.assert_outcomes(passed=1)
    assert _findings(run, LINT_CHECK) == []


def test_an_unknown_rule_in_disable_is_named(run_checklist, tmp_path):
    config = tmp_path / "triton-ready.yaml"
    config.write_text("lint:\n  disable: [no-such-rule]\n")
    run = run_checklist("test_config.py", args=("-k", LINT_CHECK, f"--triton-config={config}",
                                                f"--triton-model-repository={DEMO_REPOSITORY}"))
    run.outcome.assert_outcomes(failed=1)
    assert "unknown rule(s) no-such-rule" in _findings(run, LINT_CHECK, "lint.disable")[0]["message"]


def test_a_bad_rollout_kind_is_a_usage_error_naming_the_file(run_checklist, tmp_path):
    config = tmp_path / "triton-ready.yaml"
    config.write_text("lint:\n  rollout: {scale: rolling}\n")
    run = run_checklist("test_config.py", args=(f"--triton-config={config}",))
    assert run.outcome.ret == pytest.ExitCode.USAGE_ERROR
    run.outcome.stderr.fnmatch_lines([f"*{config}:2: key 'lint.rollout.scale': expected one of canary, blue-green, "
                                      "got 'rolling'*"])


def test_instance_count_is_skipped_with_its_reason_when_not_measured(run_checklist, h200_checklist):
    """Attached to a server it did not launch, the lint does not unload models to measure them
    unless `reload` is allowed: the rule says so as info and the check records no model memory."""
    run = _lint_run(run_checklist, h200_checklist, "instance-count-for-model-size", "bad", allow=None)
    run.outcome.assert_outcomes(passed=1)
    [info] = _findings(run, LINT_CHECK, "instance-count-for-model-size")
    assert info["severity"] == "info" and "not checked" in info["message"] and "unloads and reloads" in info["message"]
    assert not [m for m in run.result(LINT_CHECK)["measurements"] if m["name"].startswith("model GPU memory")]


def test_instance_count_rule_on_a_model_measured_on_the_h200():
    """The H200 capture measured two python models with 2 GPU instances each: GPU memory 0 MiB
    before the server started (nvidia-smi) and 3.30 GB with both loaded, 0.82 GB per instance.
    A 0.82 GB model on a 151 GB GPU wants 3-4 instances: 1 warns, 3 does not."""
    after = memory_by_gpu(readings_from_metrics(MetricsSnapshot.parse((H200 / "metrics_idle.txt").read_text())))
    used_mib = float((H200 / "nvsmi.txt").read_text().splitlines()[1].split(",")[3].split()[0])
    delta = memory_delta({H200_UUID: used_mib * 2**20}, after)
    per_instance = delta[H200_UUID] / 4
    assert per_instance == pytest.approx(0.824e9, rel=0.01)

    readings = readings_from_metrics(MetricsSnapshot.parse((H200 / "metrics_after.txt").read_text()))
    context = LintContext(gpus=readings, model_memory_bytes={"vision": {H200_UUID: per_instance}})
    one = read_model_directory(LINT_CASES / "instance-count-for-model-size" / "bad" / "vision")
    [warning] = [f for f in lint([one], context) if f.rule == "instance-count-for-model-size"]
    assert warning.severity == "warning" and "3-4 instance(s) per GPU, not 1" in warning.reason
    assert warning.value == "1 instance(s) on GPU 0, 0.82 GB each, GPU 151 GB"

    one.config.instance_group[0].count = 3
    context.model_memory_bytes["vision"] = {H200_UUID: 3 * per_instance}
    assert [f for f in lint([one], context) if f.rule == "instance-count-for-model-size"] == []

    del one.config.instance_group[:]  # Triton then puts one instance on each GPU the host has
    context.model_memory_bytes["vision"] = {H200_UUID: per_instance}
    [warning] = [f for f in lint([one], context) if f.rule == "instance-count-for-model-size"]
    assert "not 1" in warning.reason


def test_yaml_declarations_decide_stateful_and_justified_preferred_sizes():
    ranker = read_model_directory(LINT_CASES / "queue-delay-zero-with-throughput-goal" / "bad" / "ranker")
    assert lint([ranker], LintContext()) == []
    [stateful] = lint([ranker], LintContext(stateful_models={"ranker"}))
    assert stateful.rule == "dynamic-batching-on-stateful" and "lint.stateful_models" in stateful.reason

    scripted = read_model_directory(LINT_CASES / "preferred-batch-size-without-reason" / "bad" / "scripted")
    assert [f.rule for f in lint([scripted], LintContext())] == ["preferred-batch-size-without-reason"]
    assert lint([scripted], LintContext(preferred_batch_size_models={"scripted"})) == []


# -- parsing -----------------------------------------------------------------------------------
def test_a_syntax_error_names_file_line_and_column(run_checklist):
    repository = TEST_REPOSITORIES / "syntax-error"
    run = run_checklist("test_config.py", args=("-k", LINT_CHECK, f"--triton-model-repository={repository}"))
    run.outcome.assert_outcomes(failed=1)
    [finding] = _findings(run, LINT_CHECK, "config-syntax")
    path = repository / "broken" / "config.pbtxt"
    assert finding["message"].startswith(f"{path}:5:33: ")
    assert "max_queue_delay_microseconds" in finding["message"] and "fast" in finding["message"]


def test_a_config_naming_another_model_is_refused(tmp_path):
    (tmp_path / "alpha").mkdir()
    (tmp_path / "alpha" / "config.pbtxt").write_text('name: "beta"\nbackend: "python"\n')
    with pytest.raises(ConfigSyntaxError, match="name 'beta' differs from its directory 'alpha'"):
        read_model_directory(tmp_path / "alpha")


# -- the demo lints clean, from its files and from the live server ------------------------------
def test_demo_repository_files_lint_clean(run_checklist):
    run = run_checklist("test_config.py", args=("-k", LINT_CHECK, f"--triton-model-repository={DEMO_REPOSITORY}"))
    run.outcome.assert_outcomes(passed=1)
    result = run.result(LINT_CHECK)
    assert result["findings"] == []
    assert {m["name"]: m["value"] for m in result["measurements"]}["models linted"] == 3
    assert "config.pbtxt" in result["evidence"][0]["text"]


def test_demo_live_configs_lint_clean_when_only_the_url_is_known(run_checklist):
    run = run_checklist("test_config.py", args=("-k", LINT_CHECK))
    run.outcome.assert_outcomes(passed=1)
    result = run.result(LINT_CHECK)
    assert result["findings"] == []
    assert "live configs from http://127.0.0.1" in result["evidence"][0]["text"]
    assert {m["name"]: m["value"] for m in result["measurements"]}["models linted"] == 3


# -- CFG-3 version policy ----------------------------------------------------------------------
CFG3 = "test_version_policy_explicit_and_served"


def test_version_policy_of_the_demo_files_passes(run_checklist):
    run = run_checklist("test_config.py", args=("-k", CFG3, f"--triton-model-repository={DEMO_REPOSITORY}"))
    run.outcome.assert_outcomes(passed=1)
    measured = {(m["name"], m["model"]): m["value"] for m in run.result(CFG3)["measurements"]}
    assert measured[("version_policy", "scale")] == "latest 1"
    assert measured[("versions served", "scale")] == "1"


def test_version_policy_is_incomplete_from_live_configs_alone(run_checklist):
    run = run_checklist("test_config.py", args=("-k", CFG3))
    run.outcome.assert_outcomes(skipped=1)
    result = run.result(CFG3)
    assert result["verdict"] == "incomplete" and "--triton-model-repository" in result["reason"]


def test_version_policy_left_out_and_versions_not_served_fail(run_checklist, tmp_path):
    """A copy of the demo's `scale` whose config has no version_policy and whose files hold a
    version 2 the server does not serve."""
    scale = tmp_path / "scale"
    shutil.copytree(DEMO_REPOSITORY / "scale", scale)
    (scale / "2").mkdir()
    config = scale / "config.pbtxt"
    config.write_text(config.read_text().replace("version_policy: { latest: { num_versions: 1 } }", ""))
    run = run_checklist("test_config.py", args=("-k", CFG3, f"--triton-model-repository={tmp_path}"))
    run.outcome.assert_outcomes(failed=1)
    messages = [f["message"] for f in _findings(run, CFG3)]
    assert any("version_policy is not written" in m for m in messages)
    assert any("selects versions [2] (on disk: [1, 2]) but the server serves [1]" in m for m in messages)


def test_declared_canary_with_one_version_served_fails(run_checklist, tmp_path):
    config = tmp_path / "triton-ready.yaml"
    config.write_text("lint:\n  rollout: {scale: canary}\n")
    run = run_checklist("test_config.py", args=("-k", f"{CFG3} or {LINT_CHECK}", f"--triton-config={config}",
                                                f"--triton-model-repository={DEMO_REPOSITORY}"))
    run.outcome.assert_outcomes(failed=2)
    [short] = [m for m in run.result(CFG3)["measurements"] if m["name"] == "servable versions"]
    assert short["value"] == 1 and short["threshold"] == 2 and short["passed"] is False
    assert _findings(run, LINT_CHECK, "default-version-policy-under-rollout")


@pytest.fixture(scope="module")
def canary_server(tmp_path_factory):
    """A real server on a copy of `scale` with versions 1 and 2, both served (specific [1, 2])."""
    repository = tmp_path_factory.mktemp("canary")
    scale = repository / "scale"
    shutil.copytree(DEMO_REPOSITORY / "scale", scale)
    shutil.copytree(scale / "1", scale / "2")
    config = scale / "config.pbtxt"
    config.write_text(config.read_text().replace("latest: { num_versions: 1 }", "specific: { versions: [ 1, 2 ] }"))
    launcher = EmbeddedLauncher(repository)
    launcher.start()
    yield launcher
    launcher.cleanup()


def test_declared_canary_with_two_versions_served_passes(run_checklist, canary_server, tmp_path):
    config = tmp_path / "triton-ready.yaml"
    config.write_text("lint:\n  rollout: {scale: canary}\n")
    endpoints = canary_server.endpoints
    run = run_checklist("test_config.py", url=endpoints.http_url, args=(
        f"--triton-metrics-url={endpoints.metrics_url}", f"--triton-grpc-url={endpoints.grpc_url}",
        "-k", f"{CFG3} or {LINT_CHECK}", f"--triton-config={config}",
        f"--triton-model-repository={canary_server.model_repository}"))
    run.outcome.assert_outcomes(passed=2)
    measured = {m["name"]: m for m in run.result(CFG3)["measurements"]}
    assert measured["versions served"]["value"] == "1, 2"
    assert measured["servable versions"]["value"] == 2 and measured["servable versions"]["passed"] is True
    assert measured["version_policy"]["value"] == "specific [1, 2]"


# -- CFG-4 resource limits ---------------------------------------------------------------------
CFG4 = "test_gpu_memory_headroom or test_host_memory_headroom or test_pinned_memory_pool_set"


def test_resource_limits_on_the_cpu_demo(run_checklist):
    run = run_checklist("test_config.py", args=("-k", CFG4))
    run.outcome.assert_outcomes(passed=2, skipped=1)
    assert run.result("test_gpu_memory_headroom")["verdict"] == "not_applicable"
    host = {m["name"]: m for m in run.result("test_host_memory_headroom")["measurements"]}
    assert 0 < host["host memory used fraction"]["value"] < 0.9 and host["host memory used fraction"]["threshold"] == 0.9
    assert host["host memory used"]["unit"] == "GB" and host["host memory used"]["value"] > 0
    [pool] = run.result("test_pinned_memory_pool_set")["measurements"]
    assert pool["value"] == 256.0 and pool["unit"] == "MiB" and pool["passed"] is True


def test_host_memory_over_its_threshold_fails(run_checklist):
    run = run_checklist("test_config.py", args=("-k", "test_host_memory_headroom",
                                                "--triton-threshold=cpu_memory_used_max_fraction=0.001"))
    run.outcome.assert_outcomes(failed=1)
    assert "the host uses" in _findings(run, "test_host_memory_headroom")[0]["message"]


def test_gpu_models_without_a_gpu_reading_are_incomplete(run_checklist):
    repository = LINT_CASES / "gpu-instance-on-missing-gpu" / "good"
    run = run_checklist("test_config.py", args=("-k", "test_gpu_memory_headroom",
                                                f"--triton-model-repository={repository}"))
    run.outcome.assert_outcomes(skipped=1)
    result = run.result("test_gpu_memory_headroom")
    assert result["verdict"] == "incomplete" and result["reason"].startswith("vision run KIND_GPU instances")
    assert run.report["verdict"] != "READY"


def test_gpu_memory_on_the_h200_capture(run_checklist, h200_checklist):
    run = run_checklist(h200_checklist, args=("-k", "test_gpu_memory_headroom"))
    run.outcome.assert_outcomes(passed=1)
    fraction = {m["name"]: m for m in run.result("test_gpu_memory_headroom")["measurements"]}[
        f"GPU 0 ({H200_UUID}) memory used fraction"]
    assert fraction["value"] == round(3706716160 / 150754820096, 4) and fraction["threshold"] == 0.9

    tight = run_checklist(h200_checklist, args=("-k", "test_gpu_memory_headroom",
                                                "--triton-threshold=gpu_memory_used_max_fraction=0.02"))
    tight.outcome.assert_outcomes(failed=1)
    assert "uses 2.5% of its 150.8 GB, above 2%" in _findings(tight, "test_gpu_memory_headroom")[0]["message"]


@pytest.mark.parametrize("capture, used_bytes", [("metrics_idle.txt", 3295674368), ("metrics_load.txt", None),
                                                ("metrics_after.txt", 3706716160)])
def test_gpu_memory_rule_parses_the_h200_captures(capture, used_bytes):
    readings = readings_from_metrics(MetricsSnapshot.parse((H200 / capture).read_text()))
    [use] = gpu_memory_use(readings)
    assert use.total_bytes == 150754820096 and use.label == f"GPU 0 ({H200_UUID})"
    if used_bytes is not None:
        assert use.used_bytes == used_bytes
    assert 0.02 < use.fraction < 0.03
    assert gpus_over([use], 0.9) == [] and gpus_over([use], 0.02) == [use]


def test_model_memory_is_read_unloaded_then_loaded_again(canary_server):
    """The unload / read / load / read sequence against a real server. No GPU here: the reader
    returns the H200 capture before and after, and notes whether the model was loaded when read."""
    from pytest_triton_ready.lint.model_memory import measure_model_memory
    from pytest_triton_ready.server.client import TritonClient
    from pytest_triton_ready.server.gpu import GpuReader

    endpoints = canary_server.endpoints
    client = TritonClient(endpoints.http_url, endpoints.grpc_url)
    captures = iter([(H200 / "metrics_idle.txt").read_text(), (H200 / "metrics_after.txt").read_text()])
    ready_when_read = []

    def scrape():
        ready_when_read.append(client.model_ready("scale"))
        return MetricsSnapshot.parse(next(captures))

    memory = measure_model_memory(client, GpuReader(scrape, same_host=False), "scale")
    assert ready_when_read == [False, True]
    assert memory == {H200_UUID: 3706716160 - 3295674368}
    assert client.model_ready("scale") and client.infer("scale").ok
