"""Unit tests, no server: ensembles and BLS pipelines (composing models, the per-step breakdown,
the ensemble lint rule, the `models.bls_composing` setting), the server's state at the start of a
run and the comparisons made with it, and the causes named for unanswered requests and for a
shutdown held by a model that stayed loaded."""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from conftest import TEST_REPOSITORIES
from pytest_triton_ready.lint import LintContext, lint, read_repository
from pytest_triton_ready.load.server_side import ModelWindow, ServerProbe, ServerWindow
from pytest_triton_ready.server.client import TritonClient, UnansweredRequest, is_timeout, unanswered
from pytest_triton_ready.server.log import read_shutdown_log
from pytest_triton_ready.server.models import InitialState, initial_state_of, read_initial_state
from pytest_triton_ready.server.pipelines import (
    bottleneck,
    composing_models,
    composing_of_any,
    failures_between,
    pipeline_kind,
    step_times,
)
from pytest_triton_ready.settings import SettingsError, build_settings


def _ensemble(*steps: str) -> dict:
    return {"platform": "ensemble", "ensemble_scheduling": {"step": [{"model_name": s} for s in steps]}}


CONFIGS = {"pipeline": _ensemble("preprocess", "inner"), "inner": _ensemble("classify", "preprocess"),
           "preprocess": {"backend": "python"}, "classify": {"backend": "python"}, "bls": {"backend": "python"},
           "loop": _ensemble("loop"), "broken": _ensemble("missing")}


def _config_of(name):
    return CONFIGS[name]  # KeyError for a model that does not exist, as a 400 from the server


def test_an_ensembles_composing_models_include_nested_steps_and_a_bls_models_come_from_the_settings():
    assert composing_models("pipeline", _config_of) == ["preprocess", "inner", "classify"]
    assert composing_models("preprocess", _config_of) == []
    assert composing_models("bls", _config_of, {"bls": ["preprocess", "classify"]}) == ["preprocess", "classify"]
    assert composing_models("loop", _config_of) == []  # an ensemble calling itself does not recurse
    assert composing_models("broken", _config_of) == ["missing"]  # a step whose config cannot be read is listed
    assert composing_of_any(["pipeline", "bls"], _config_of, {"bls": ["sum"]}) == {"preprocess", "inner", "classify",
                                                                                   "sum"}
    assert pipeline_kind("pipeline", CONFIGS["pipeline"], {}) == "ensemble"
    assert pipeline_kind("bls", CONFIGS["bls"], {"bls": ["preprocess"]}) == "BLS"
    assert pipeline_kind("bls", CONFIGS["bls"], {}) is None


def _window(success, fail, queue, infer):
    return ModelWindow("m", success, fail, success, success, {"queue": queue, "compute_input": 1.0,
                                                              "compute_infer": infer, "compute_output": 1.0},
                       1.0, None)


def test_the_bottleneck_step_is_the_one_with_the_most_queue_and_compute_time_per_request():
    server = ServerWindow(models={"pipeline": _window(100, 0, 5.0, 30000.0), "preprocess": _window(100, 0, 40.0, 80.0),
                                  "classify": _window(100, 0, 9000.0, 20100.0), "idle": _window(0, 0, None, None)})
    times = step_times(server, ["preprocess", "classify", "idle", "not_measured"])
    assert [t.model for t in times] == ["preprocess", "classify", "idle"]
    assert times[1].queue_us == 9000.0 and times[1].compute_us == pytest.approx(20102.0)
    slowest = bottleneck(times)
    assert slowest.model == "classify"
    assert slowest.describe() == "classify: queue 9000 us + compute 20102 us per request (100 requests)"
    assert bottleneck(step_times(server, ["idle"])) is None  # served no request: no bottleneck to name
    assert step_times(None, ["preprocess"]) == []
    failing = step_times(ServerWindow(models={"preprocess": _window(0, 50, 2.0, None)}), ["preprocess"])
    assert failing[0].failed == 50 and failing[0].requests == 50


def test_a_step_whose_failure_counter_rose_is_named():
    assert failures_between({"preprocess": 3, "classify": 0}, {"preprocess": 5, "classify": 0, "new": 9}) == {
        "preprocess": 2}


def test_a_pipelines_server_probe_reads_its_steps_statistics_too():
    target = SimpleNamespace(client=SimpleNamespace(model_config=_config_of, raw=lambda path: (200, b"{}")),
                             settings=SimpleNamespace(bls_composing={"bls": ["sum"]}), scrape_metrics=None)
    assert ServerProbe.for_target(target, ["pipeline"]).models == ["pipeline", "classify", "inner", "preprocess"]
    assert ServerProbe.for_target(target, ["bls", "preprocess"]).models == ["bls", "preprocess", "sum"]
    assert ServerProbe.for_target(target, ["classify"]).models == ["classify"]


# -- the ensemble lint rule --------------------------------------------------------------------------
ENSEMBLE_CASES = TEST_REPOSITORIES / "lint" / "ensemble-steps"


def _lint(repository: Path, repository_known: bool = True):
    sources, errors = read_repository(repository)
    assert not errors
    context = LintContext(repository={s.name: s for s in sources} if repository_known else None,
                          repository_where=f"repository {repository}")
    return [f for f in lint(sources, context) if f.rule == "ensemble-steps"]


def test_the_ensemble_rule_names_each_broken_step_and_stays_quiet_on_a_sound_ensemble():
    assert _lint(ENSEMBLE_CASES / "good") == []
    findings = _lint(ENSEMBLE_CASES / "bad")
    found = {f.model: f for f in findings}
    assert set(found) == {"missing_step", "small_step", "wrong_dtype", "wrong_tensor"}
    assert f"step 2 calls not_in_repository, which is not in repository {ENSEMBLE_CASES / 'bad'}: the ensemble " \
           "cannot load" == found["missing_step"].reason
    assert "VALUES of classify, which declares no such input (it has FEATURES)" in found["wrong_tensor"].reason
    assert "INPUT (TYPE_INT32) to input RAW of preprocess, which takes TYPE_FP32" in found["wrong_dtype"].reason
    assert [f.value for f in findings if f.model == "small_step"] == [
        "step 1 preprocess max_batch_size 8 < 16", "step 2 classify max_batch_size 8 < 16"]
    assert all(f.severity == "error" for f in found.values())


def test_the_ensemble_rule_judges_no_step_where_the_repository_is_unknown():
    assert _lint(ENSEMBLE_CASES / "bad", repository_known=False) == []  # nothing known of the steps' models


def test_a_step_model_outside_the_models_in_scope_is_still_found(tmp_path):
    sources, _ = read_repository(ENSEMBLE_CASES / "good", ["pipeline"])
    everything, _ = read_repository(ENSEMBLE_CASES / "good")
    context = LintContext(repository={s.name: s for s in everything})
    assert [f for f in lint(sources, context) if f.rule == "ensemble-steps"] == []
    context = LintContext(repository={"pipeline": sources[0], "preprocess": None, "classify": None})
    assert [f for f in lint(sources, context) if f.rule == "ensemble-steps"] == []  # exists, config unread


# -- models.bls_composing ------------------------------------------------------------------------------
def test_models_may_be_a_list_or_a_mapping_with_the_bls_composing_models(tmp_path):
    mapping = tmp_path / "m.yaml"
    mapping.write_text("models:\n  in_scope: [bls, preprocess]\n  bls_composing:\n    bls: [preprocess, classify]\n")
    settings = build_settings({}, {}, {}, str(mapping))
    assert settings.triton_models == ["bls", "preprocess"]
    assert settings.bls_composing == {"bls": ["preprocess", "classify"]}
    plain = tmp_path / "p.yaml"
    plain.write_text("models: [a, b]\n")
    assert build_settings({}, {}, {}, str(plain)).triton_models == ["a", "b"]
    assert build_settings({}, {}, {}, str(plain)).bls_composing == {}
    bad = tmp_path / "b.yaml"
    bad.write_text("models:\n  bls_composing: {bls: preprocess}\n")
    with pytest.raises(SettingsError, match=r"b.yaml:2: key .models.bls_composing.bls.: expected a list"):
        build_settings({}, {}, {}, str(bad))


# -- the server's state at the start ---------------------------------------------------------------------
class _Client:
    def __init__(self, index, live=True, ready=400, version="2.51.0"):
        self.index, self._live, self._ready, self.version = index, live, ready, version

    def repository_index(self):
        return self.index

    def live(self):
        return self._live

    def ready(self):
        return self._ready == 200

    def get_status(self, path):
        return self._ready

    def server_metadata(self):
        return {"version": self.version}


INDEX = [{"name": "good", "version": "1", "state": "READY"},
         {"name": "fails_to_load", "version": "1", "state": "UNAVAILABLE",
          "reason": "RuntimeError: weights file weights.bin is missing"},
         {"name": "unparsed"}]


def test_the_initial_state_names_the_models_not_ready_with_the_servers_reason():
    state = read_initial_state(_Client(INDEX), {"unparsed": "config.pbtxt:3: bad field"})
    assert state.not_ready == {"fails_to_load": "UNAVAILABLE: RuntimeError: weights file weights.bin is missing",
                               "unparsed": "NOT LOADED: config.pbtxt:3: bad field"}
    assert state.ready_models == {"good"} and state.ready_status == 400 and state.server_version == "2.51.0"
    assert state.left_out(["good", "fails_to_load"]) == ["fails_to_load"]
    assert initial_state_of(SimpleNamespace()) == InitialState()  # a target that never read one


def test_after_an_action_only_what_got_worse_than_at_the_start_is_named():
    started_400 = read_initial_state(_Client(INDEX))
    assert started_400.health_after(True, 400, {"good"}) is None  # ready 400 from the start: CFG-1's finding
    assert started_400.health_after(True, 400, set()) == "good no longer READY (READY when the run started)"
    assert started_400.health_after(False, 400).startswith("the server is no longer live")
    healthy = InitialState(ready_models=frozenset({"good"}))
    assert healthy.health_after(True, 400) == "/v2/health/ready answers 400, 200 when the run started"
    assert healthy.health_after(True, 200) is None


def test_a_server_ready_400_from_the_start_is_restored_when_back_as_it_was(monkeypatch):
    import pytest_triton_ready.server.models as models

    started_400 = read_initial_state(_Client(INDEX))
    monkeypatch.setattr(models, "ready_names", lambda client: {e["name"] for e in client.index
                                                               if e.get("state") == "READY"})
    assert started_400.restored(_Client(INDEX))
    assert not started_400.restored(_Client(INDEX[1:]))  # the good model did not come back
    assert not InitialState().restored(_Client(INDEX))  # ready 200 at the start: 200 is what restored means


# -- causes named right --------------------------------------------------------------------------------
class _SilentModel(BaseHTTPRequestHandler):
    """Answers health and config at once, and every inference only after 3 s."""

    def log_message(self, *args):
        pass

    def do_GET(self):
        body = b"{}" if "config" in self.path else b""
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        time.sleep(3)
        self.send_response(500)
        self.end_headers()


def test_a_model_that_does_not_answer_while_the_server_is_live_is_named_not_the_server():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _SilentModel)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    client = TritonClient(f"http://127.0.0.1:{server.server_port}", "127.0.0.1:1", timeout_s=0.5)
    try:
        outcome = client.infer("never_answers", {"INPUT0": np.zeros(4, dtype=np.float32)})
        with pytest.raises(UnansweredRequest, match=r"^never_answers did not answer within 0.5 s \(server live\)$"):
            client.raw("/v2/models/never_answers/infer", "POST", b"{}")  # as SEC-3's malformed cases are sent
    finally:
        client.close()
        server.shutdown()
        server.server_close()
    assert not outcome.ok and not outcome.refused  # no answer is no refusal: no hint about synthesized inputs
    assert outcome.error == "never_answers did not answer within 0.5 s (server live)"


def test_timeouts_are_told_apart_from_refused_connections():
    assert is_timeout(TimeoutError("timed out"))
    assert is_timeout(SimpleNamespace(status=lambda: "StatusCode.DEADLINE_EXCEEDED", reason="Deadline Exceeded"))
    assert not is_timeout(ConnectionRefusedError(111, "Connection refused"))
    assert unanswered("m", 10, False) == "m did not answer within 10 s (the server does not answer /v2/health/live either)"


def test_the_shutdown_log_names_the_model_that_stayed_loaded():
    log = ("I1129 model_lifecycle.cc:839] \"successfully loaded 'mlp'\"\n"
           "I1129 model_lifecycle.cc:839] \"successfully loaded 'mlp_nobatch'\"\n"
           "I1129 model_lifecycle.cc:839] \"successfully loaded 'generate'\"\n"
           "Signal (15) received.\n"
           "I1129 server.cc:321] \"Timeout 30: Found 0 model versions that have in-flight inferences\"\n"
           "I1129 server.cc:345] \"Timeout 30: Found 3 live models and 0 in-flight non-inference requests\"\n"
           "I1129 model_lifecycle.cc:624] \"successfully unloaded 'mlp' version 1\"\n"
           "I1129 model_lifecycle.cc:624] \"successfully unloaded 'mlp_nobatch' version 1\"\n"
           "I1129 server.cc:345] \"Timeout 29: Found 1 live models and 0 in-flight non-inference requests\"\n"
           "E1129 main.cc:535] \"failed to stop server: Internal - Exit timeout expired. Exiting immediately.\"\n")
    shutdown = read_shutdown_log(log, "mlp")
    assert shutdown.still_loaded == ("generate",)  # not "mlp", the model the experiment was about
    assert read_shutdown_log(log.replace("Found 3 live", "Found 0 live").replace("Found 1 live", "Found 0 live"),
                             "mlp").still_loaded == ()



def test_an_ensemble_triton_refused_is_named_with_the_servers_reason_from_its_log():
    from pytest_triton_ready.server.log import model_load_failures

    # seen on Triton 2.51 with tests/repositories/pipelines
    log = ('E1201 20:34:38.564379 5255 model_repository_manager.cc:703] "Invalid argument: ensemble '
           'pipeline_missing_step contains models that are not available or ambiguous: not_in_repository"\n'
           'E1201 20:34:46.510761 5255 model_repository_manager.cc:703] "Invalid argument: in ensemble '
           'pipeline_wrong_tensor, ensemble tensor scaled is mapping to non-existing input VALUES in model classify"\n')
    assert model_load_failures(log) == {
        "pipeline_missing_step": "Invalid argument: ensemble pipeline_missing_step contains models that are not "
                                 "available or ambiguous: not_in_repository",
        "pipeline_wrong_tensor": "Invalid argument: in ensemble pipeline_wrong_tensor, ensemble tensor scaled is "
                                 "mapping to non-existing input VALUES in model classify"}


def test_findings_from_a_models_traffic_name_the_version_served_and_the_server_version():
    from pytest_triton_ready.server.models import served_as

    target = SimpleNamespace(client=_Client(INDEX + [{"name": "good", "version": "2", "state": "READY"}]),
                             initial_state=read_initial_state(_Client(INDEX, version="2.51.0")))
    assert served_as(target, ["good", "gone"]) == {"good": "good version 1, 2 on Triton 2.51.0",
                                                   "gone": "gone version ? on Triton 2.51.0"}


def test_faults_break_a_top_level_model_before_a_pipeline_step_and_watch_the_right_readiness():
    from pytest_triton_ready.faults.crash_experiments import ready_endpoint
    from pytest_triton_ready.faults.injector import FaultInjector

    configs = {"pipeline": _ensemble("preprocess", "classify"), "bls": {"backend": "python"},
               "preprocess": {"backend": "python", "instance_group": [{"count": 4}]},
               "classify": {"backend": "python"}}
    index = [{"name": m, "version": "1", "state": "READY"} for m in configs]
    client = SimpleNamespace(repository_index=lambda: index, model_config=lambda m: configs[m])
    target = SimpleNamespace(client=client, models=lambda: sorted(configs), launcher=None,
                             settings=SimpleNamespace(bls_composing={"bls": ["classify"]}))
    injector = FaultInjector.__new__(FaultInjector)
    injector.target, injector.plan = target, SimpleNamespace(model=None)
    assert injector.pipeline_steps() == {"preprocess": ["pipeline"], "classify": ["bls", "pipeline"]}
    assert injector.choose_model() == "bls"  # preprocess has more instances, but is a step of pipeline
    assert ready_endpoint(SimpleNamespace(), "bls") == "/v2/health/ready"
    started_400 = SimpleNamespace(initial_state=InitialState(ready_status=400))
    assert ready_endpoint(started_400, "bls") == "/v2/models/bls/ready"
