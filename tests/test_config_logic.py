"""The config phase's decisions without a server: model states read from a repository index
(CFG-1 "models READY"), when a GPU model's memory is measured (CFG-1 lint), and a version policy
against the versions served (CFG-3). The records are real CheckRecorders; the repository indexes
are written as Triton 2.51 answers POST /v2/repository/index."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from pytest_triton_ready.config.versions import judge_version_policy, policy_problems, served_by_index
from pytest_triton_ready.lint.deployment import memory_unmeasured_reason
from pytest_triton_ready.lint.modelconfig import read_model_directory, source_from_server
from pytest_triton_ready.lint.sources import DeploymentConfigs
from pytest_triton_ready.record.model import Result
from pytest_triton_ready.record.recorder import CheckRecorder
from pytest_triton_ready.serving import UNPARSED, judge_models_ready, model_states, same_outputs


def _check(check_id="CFG-1", test="test_models_ready"):
    return CheckRecorder(Result(check_id, "config", "t", f"checks/test_config.py::{test}"))


def _target(index, models, ready=(), failed=None):
    client = SimpleNamespace(repository_index=lambda: index, model_ready=lambda m: m in ready)
    return SimpleNamespace(client=client, models=lambda: models,
                           launcher=SimpleNamespace(failed_models=failed or {}))


def test_an_entry_without_a_state_is_a_model_that_never_loaded_with_the_launchers_reason():
    entries = [{"name": "broken"}]
    (state,) = model_states("broken", entries, {"broken": "config.pbtxt:3: unknown field 'bogus'"})
    assert (state.label, state.state) == ("broken", "NOT LOADED")
    assert state.problem == "broken was never loaded: config.pbtxt:3: unknown field 'bogus'"
    (unknown,) = model_states("broken", entries, {})
    assert unknown.reason == UNPARSED


def test_each_version_not_ready_is_a_problem_with_the_servers_reason():
    entries = [{"name": "m", "version": "1", "state": "READY"},
               {"name": "m", "version": "2", "state": "UNAVAILABLE", "reason": "unloaded"},
               {"name": "m", "version": "3", "state": "LOADING"}]
    states = model_states("m", entries, {})
    assert [(s.label, s.problem) for s in states] == [
        ("m/1", None), ("m/2", "m version 2 is UNAVAILABLE: unloaded"),
        ("m/3", "m version 3 is LOADING: the server gave no reason")]


def test_models_ready_fails_on_a_missing_model_and_a_ready_endpoint_that_disagrees():
    index = [{"name": "a", "version": "1", "state": "READY"}, {"name": "b", "version": "1", "state": "READY"}]
    check = _check()
    judge_models_ready(check, _target(index, ["a", "b", "gone"], ready={"a"}))
    messages = [f.message for f in check.errors]
    assert messages == ["b: READY in the index but /v2/models/b/ready does not answer 200",
                        "gone: not in the repository index"]
    assert check.failed and check.result.recommendations


def test_models_ready_passes_when_every_model_is_ready_on_both():
    index = [{"name": "a", "version": "1", "state": "READY"}]
    check = _check()
    judge_models_ready(check, _target(index, ["a"], ready={"a"}))
    assert check.judged and not check.failed


def test_an_empty_index_is_a_finding_not_a_pass():
    check = _check()
    judge_models_ready(check, _target([], []))
    assert [f.message for f in check.errors] == ["the repository index lists no model at all"]


def test_a_second_answer_differs_when_any_output_differs_or_is_missing():
    import numpy as np

    first = {"y": np.array([1.0, 2.0]), "z": np.array([3])}
    assert same_outputs(first, {"y": np.array([1.0, 2.0]), "z": np.array([3])})
    assert not same_outputs(first, {"y": np.array([1.0, 2.5]), "z": np.array([3])})
    assert not same_outputs(first, {"y": np.array([1.0, 2.0])})


@pytest.mark.parametrize(("enabled", "refusal", "served", "reason"), [
    (True, None, {"m"}, None),
    (True, "reload is not allowed on an attached server", {"m"}, "reload is not allowed on an attached server"),
    (False, None, {"m"}, "measuring a model's GPU memory unloads and reloads it: lint.measure_model_memory is false"),
    (True, None, set(), "the model is not loaded on the server"),
])
def test_a_gpu_models_memory_is_measured_only_where_a_reload_is_allowed_and_it_is_loaded(enabled, refusal, served,
                                                                                          reason):
    assert memory_unmeasured_reason("m", enabled=enabled, refusal=refusal, served=served) == reason


def _model(tmp_path: Path, policy: str, versions: list[int]):
    directory = tmp_path / "m"
    for version in versions:
        (directory / str(version)).mkdir(parents=True)
    directory.mkdir(exist_ok=True)
    (directory / "config.pbtxt").write_text(f'name: "m"\nbackend: "python"\nmax_batch_size: 0\n{policy}\n')
    return read_model_directory(directory)


def test_the_index_gives_each_models_ready_numeric_versions_sorted():
    index = [{"name": "m", "version": "2", "state": "READY"}, {"name": "m", "version": "1", "state": "READY"},
             {"name": "m", "version": "3", "state": "UNAVAILABLE"}, {"name": "n", "state": "READY"}]
    assert served_by_index(index) == {"m": [1, 2]}


def test_a_policy_left_out_and_versions_not_served_are_two_problems(tmp_path):
    source = _model(tmp_path, "", [1, 2])
    problems = [message for message, _ in policy_problems(source, [1])]
    assert len(problems) == 2
    assert "version_policy is not written" in problems[0]
    assert problems[1] == "m: the policy latest 1 selects versions [2] (on disk: [1, 2]) but the server serves [1]"


def test_a_written_policy_served_as_written_has_no_problem(tmp_path):
    source = _model(tmp_path, "version_policy: { specific: { versions: [1, 2] } }", [1, 2, 3])
    assert policy_problems(source, [1, 2]) == []


def test_a_live_config_serving_more_versions_than_its_policy_allows_is_a_problem():
    source = source_from_server("m", {"name": "m", "backend": "python",
                                      "version_policy": {"latest": {"num_versions": 1}}}, "live")
    assert policy_problems(source, [1, 2]) == [
        ("m: the policy latest 1 allows 1 version(s) at once but the server serves [1, 2]", [1, 2])]


def test_a_declared_canary_with_one_version_served_fails_and_an_undeclared_rollout_model_is_named(tmp_path):
    source = _model(tmp_path, "version_policy: { latest: { num_versions: 1 } }", [1])
    found = DeploymentConfigs("repository r", [source])
    check = _check("CFG-3", "test_version_policy_explicit_and_served")
    judge_version_policy(check, found, [{"name": "m", "version": "1", "state": "READY"}],
                         {"m": "canary", "other": "blue-green"})
    messages = [f.message for f in check.errors]
    assert messages == ["m: a canary rollout is declared but only 1 version(s) serve ([1]); old and new must serve "
                        "side by side", "lint.rollout names other, which is not among the configs in repository r"]


def test_live_configs_alone_end_incomplete_after_judging_the_versions():
    source = source_from_server("m", {"name": "m", "backend": "python"}, "live")
    check = _check("CFG-3", "test_version_policy_explicit_and_served")
    with pytest.raises(pytest.skip.Exception, match="only be read from the files"):
        judge_version_policy(check, DeploymentConfigs("live", [source], from_files=False),
                             [{"name": "m", "version": "1", "state": "READY"}], {})
    assert check.judged
