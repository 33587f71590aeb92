"""A repository of broken model configs: the launcher settles as soon as the server is live and no
model is loading (a model listed without a state failed to parse or validate), serves the good
model, and names the failed ones with the server's reason."""

from __future__ import annotations

import time

from conftest import TEST_REPOSITORIES
from pytest_triton_ready.launchers.embedded import EmbeddedLauncher
from pytest_triton_ready.launchers.settle import failed_models, loading_finished
from pytest_triton_ready.server.client import TritonClient

REJECTED_CONFIGS = {"syntax_error", "unknown_field", "preferred_above_max", "cache_on_sequence"}


def test_start_up_settles_fast_serves_the_good_model_and_names_the_failed_ones():
    launcher = EmbeddedLauncher(TEST_REPOSITORIES / "broken_configs")
    started = time.monotonic()
    try:
        endpoints = launcher.start()
        took = time.monotonic() - started
        assert took < 30, f"start-up took {took:.1f} s: the stateless index entries were waited for"
        assert set(launcher.failed_models) == REJECTED_CONFIGS | {"gpu_that_does_not_exist"}
        reasons = launcher.failed_models
        assert reasons["syntax_error"].startswith(str(TEST_REPOSITORIES / "broken_configs" / "syntax_error" / "config.pbtxt:"))
        assert 'has no field named "' in reasons["unknown_field"] and "config.pbtxt:" in reasons["unknown_field"]
        assert "preferred size must be <= max batch size" in reasons["preferred_above_max"]
        assert "Response Cache does not currently support" in reasons["cache_on_sequence"]
        assert "invalid or unsupported gpu id 7" in reasons["gpu_that_does_not_exist"]
        client = TritonClient(endpoints.http_url, endpoints.grpc_url)
        try:
            index = {e["name"]: e for e in client.repository_index()}
            assert {name for name in REJECTED_CONFIGS if "state" not in index[name]} == REJECTED_CONFIGS
            assert index["good"]["state"] == "READY" and client.infer("good").ok
            # Triton 2.51 accepts dynamic batching with max_batch_size 0: a lint finding, not a load failure.
            assert index["batching_without_batch_dim"]["state"] == "READY"
            assert client.get_status("/v2/health/ready") == 400  # strict readiness: some models failed
        finally:
            client.close()
    finally:
        launcher.cleanup()


def test_index_without_state_counts_as_settled_and_failed():
    index = [{"name": "good", "version": "1", "state": "READY"}, {"name": "unknown_field"},
             {"name": "slow", "version": "1", "state": "UNAVAILABLE", "reason": "boom"}]
    assert loading_finished(index)
    assert not loading_finished(index + [{"name": "big", "version": "1", "state": "LOADING"}])
    assert not loading_finished(None)
    log = ("I1130 model_lifecycle.cc:1] loading: good:1\n"
           "E1130 model_repository_manager.cc:1] \"Poll failed for model directory 'unknown_field': failed to "
           "read text proto from /r/unknown_field/config.pbtxt\"\n")
    assert failed_models(index, log) == {"unknown_field": "failed to read text proto from /r/unknown_field/config.pbtxt",
                                         "slow": "boom"}
    parse_error = ("[libprotobuf ERROR text_format.cc:337] Error parsing text-format inference.ModelConfig: 16:12: "
                   "Message type \"inference.ModelConfig\" has no field named \"bogus\".\n")
    assert failed_models(index, parse_error + log)["unknown_field"] == (
        '/r/unknown_field/config.pbtxt:16:12: Message type "inference.ModelConfig" has no field named "bogus".')
    assert failed_models([{"name": "lost"}], "")["lost"].startswith("its config failed to parse or validate")


def test_a_broken_repository_is_not_ready_naming_every_model_fast(run_checklist):
    started = time.monotonic()
    run = run_checklist("test_config.py", url=None, args=(
        "--triton-launch=embedded", f"--triton-model-repository={TEST_REPOSITORIES / 'broken_configs'}"))
    took = time.monotonic() - started
    assert run.report["verdict"] == "NOT READY"
    assert took < 30, f"a broken repository took {took:.1f} s to judge"
    ready = run.result("test_models_ready")
    named = {f["model"] for f in ready["findings"] if f["severity"] == "error"}
    assert named == REJECTED_CONFIGS | {"gpu_that_does_not_exist"}
    lint = run.result("test_model_configs_lint_clean")
    linted = {f["rule"] for f in lint["findings"] if f["severity"] == "error"}
    assert {"config-syntax", "dynamic-batching-without-max-batch-size"} <= linted
    messages = " ".join(f["message"] for f in ready["findings"] + lint["findings"])
    for model in REJECTED_CONFIGS | {"gpu_that_does_not_exist", "batching_without_batch_dim"}:
        assert model in messages, f"{model} is not named"
