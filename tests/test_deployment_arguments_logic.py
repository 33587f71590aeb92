"""The manifest's tritonserver flags against the server this run measured (deployment/arguments.py
measured_arguments): Triton's k8s-onprem chart against the embedded launcher's command line."""

from __future__ import annotations

from pathlib import Path

from pytest_triton_ready.deployment.arguments import measured_arguments
from pytest_triton_ready.deployment.judgement import FAIL, INCOMPLETE, PASS
from pytest_triton_ready.deployment.manifest import read_manifest
from pytest_triton_ready.launchers import serving_flags, stable_arguments

DATA = Path(__file__).resolve().parent / "data" / "deployments"
# What the embedded launcher ran (launch_identity()["arguments"]: the per-run paths and ports left out).
EMBEDDED = stable_arguments(["/opt/tritonserver/bin/tritonserver", "--model-repository=/tmp/models",
                             *serving_flags(30), "--http-port=8000"])


def _container(name: str = "k8s-onprem.yaml"):
    (container,) = read_manifest(DATA / name, "1.25.0").containers
    return container


def test_the_charts_default_mode_against_the_explicit_mode_measured_fails_naming_what_does_not_carry_over():
    judged = measured_arguments(_container(), EMBEDDED, "")
    assert judged.verdict == FAIL and judged.field == "spec.template.spec.containers[0].args"
    assert judged.message == ("--model-control-mode: the pod none, the server measured explicit (PERF-4's reload and "
                              "rollout checks and OPS-1): those checks judged another server than the pod will run")
    assert judged.manifest_value["--exit-timeout-secs"] == "30" and judged.fix.startswith("measure the server the pod")


def test_the_same_flags_pass_and_restricted_api_values_are_never_shown(tmp_path):
    secret = "admin-key=s3cr3t"
    flags = ["--model-control-mode=explicit", f"--http-restricted-api=model-repository,shared-memory:{secret}"]
    manifest = tmp_path / "rendered.yaml"
    manifest.write_text((DATA / "k8s-onprem.yaml").read_text().replace(
        "            - --model-repository=/models\n",
        "            - --model-repository=/models\n" + "".join(f"            - {flag}\n" for flag in flags)))
    (container,) = read_manifest(manifest, "1.25.0").containers
    measured = [*EMBEDDED, "--http-restricted-api=shared-memory,model-repository:other=value"]
    judged = measured_arguments(container, measured, "")
    assert judged.verdict == PASS, judged.message
    assert "--http-restricted-api=model-repository,shared-memory" in judged.message
    assert secret not in judged.message and secret not in str(judged.manifest_value)
    differing = measured_arguments(container, EMBEDDED, "")
    assert differing.verdict == FAIL and secret not in differing.message
    assert "--http-restricted-api: the pod model-repository,shared-memory, the server measured none" in differing.message


def test_an_attached_server_has_no_known_command_line_and_is_incomplete():
    judged = measured_arguments(_container(), None, "the server was attached (--triton-url)")
    assert judged.verdict == INCOMPLETE
    assert judged.message == "the container's flags, held against nothing: the server was attached (--triton-url)"


def test_the_charts_queue_time_target_is_held_against_the_p99_budget(tmp_path):
    from pytest_triton_ready.deployment.posture import hpa_targets

    manifest = read_manifest(DATA / "k8s-onprem.yaml", "1.25.0")
    (within,) = hpa_targets(manifest, manifest.containers[0], 100.0, "scale's SLO")
    assert within.verdict == PASS and within.field == "spec.metrics[0].pods.target"
    assert within.message == "the autoscaler targets avg_time_queue_us at 0.05 ms; the p99 budget is 100 ms (scale's SLO)"
    late = tmp_path / "late.yaml"
    late.write_text((DATA / "k8s-onprem.yaml").read_text().replace("averageValue: 50", "averageValue: 250000"))
    manifest = read_manifest(late, "1.25.0")
    (beyond,) = hpa_targets(manifest, manifest.containers[0], 100.0, "scale's SLO")
    assert beyond.verdict == FAIL and beyond.message.endswith(": pods are added only once requests already miss it")
    assert beyond.fix.startswith("spec.metrics[0].pods.target: well below 100 ms")
    (unknown,) = hpa_targets(manifest, manifest.containers[0], None, "no SLO")
    assert unknown.verdict == INCOMPLETE
