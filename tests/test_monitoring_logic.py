"""The monitoring checks' decisions without a server: when the success counter counts as moving
(MON-1), the GPU warnings and notes on the four layers (MON-1), why alerts were not evaluated live
(MON-2), and a dashboard's queries judged against a server's metric names (MON-3). Dashboards and
rule files are written as Grafana and Prometheus read them; the records are real CheckRecorders."""

from __future__ import annotations

import json

import pytest
from default_settings import default_settings

from pytest_triton_ready.monitoring.alert_audit import prometheus_missing_reason
from pytest_triton_ready.monitoring.catalogue import BUSINESS, COST, INFRASTRUCTURE, LAYERS, SERVICE_HEALTH
from pytest_triton_ready.monitoring.dashboard import load_dashboard
from pytest_triton_ready.monitoring.dashboard_audit import panels_by_layer, recordings_of, review_queries
from pytest_triton_ready.monitoring.endpoint import MOVE_ATTEMPTS, requests_until_rise
from pytest_triton_ready.monitoring.four_layers import (
    gpu_memory_warnings,
    judge_layers,
    layer_table,
    utilization_notes,
)
from pytest_triton_ready.monitoring.references import NO_GPU, MetricJudge
from pytest_triton_ready.monitoring.values import LayerValue
from pytest_triton_ready.record.model import Result
from pytest_triton_ready.record.recorder import CheckRecorder


def _check():
    return CheckRecorder(Result("MON-1", "monitoring", "t", "checks/test_monitoring.py::t"), default_settings())


def _counter(rises_after: int):
    sent = []

    def send():
        sent.append(1)
        return None

    return send, lambda: 1.0 if len(sent) >= rises_after else 0.0


def test_the_counter_moving_on_the_first_request_stops_after_one():
    assert requests_until_rise(*_counter(1)) == (1, 1.0, None)


def test_behind_a_balancer_requests_are_sent_until_the_counter_moves():
    assert requests_until_rise(*_counter(3)) == (3, 1.0, None)


def test_a_counter_that_never_moves_is_given_every_attempt():
    assert requests_until_rise(*_counter(99)) == (MOVE_ATTEMPTS, 0.0, None)


def test_a_failed_request_stops_sending_and_says_why():
    answers = iter([None, "the inference meant to move the counters failed: 503"])
    sent, rise, failure = requests_until_rise(lambda: next(answers), lambda: 0.0)
    assert (sent, rise, failure) == (1, 0.0, "the inference meant to move the counters failed: 503")


GPU_VALUES = [
    LayerValue(INFRASTRUCTURE, "GPU 0 memory used", 0.95, "ratio"),
    LayerValue(INFRASTRUCTURE, "GPU 1 memory used", 0.50, "ratio"),
    LayerValue(INFRASTRUCTURE, "GPU 2 memory used", None, "ratio", note="no reading"),
    LayerValue(COST, "GPU 0 utilization", 0.20, "ratio"),
    LayerValue(COST, "GPU 1 utilization", 0.75, "ratio"),
]


def test_gpu_memory_at_or_above_its_limit_warns_and_an_unread_gpu_does_not():
    assert gpu_memory_warnings(GPU_VALUES, 0.9) == ["GPU 0 memory used is 95.0%, at or above the 90% warning level"]


def test_gpu_utilization_outside_its_band_is_noted():
    notes = utilization_notes(GPU_VALUES, 0.6, 0.85)
    assert notes == ["GPU 0 utilization is 20% during the probe; the target under production load is 60%-85% "
                     "(PERF-2 measures it under load)"]


def test_the_layer_table_names_the_model_and_an_unread_value():
    table = layer_table([LayerValue(BUSINESS, "inferences per second", 12.345, "infer/s", model="m"),
                         LayerValue(INFRASTRUCTURE, "GPU 2 memory used", None, "ratio", note="no reading")])
    assert table.splitlines() == ["business | inferences per second [m] | 12.35 infer/s | ",
                                  "infrastructure | GPU 2 memory used | n/a ratio | no reading"]


def test_a_layer_without_a_readable_value_fails_the_check():
    check = _check()
    judge_layers(check, [LayerValue(layer, f"{layer} value", 1.0, "") for layer in LAYERS if layer != COST])
    assert [f.message for f in check.errors] == [f"no {COST} value can be read from the metrics endpoint"]


def test_missing_prometheus_names_the_setting_or_the_path():
    assert prometheus_missing_reason("/opt/prom").startswith("monitoring.prometheus /opt/prom does not exist")
    assert "not on PATH" in prometheus_missing_reason(None)
    assert prometheus_missing_reason(None).endswith(": the alerts were not evaluated in Prometheus")


@pytest.fixture
def dashboard(tmp_path):
    panels = [
        {"title": "Success", "targets": [{"refId": "A", "expr": "rate(nv_inference_request_success[5m])"}]},
        {"title": "Typo", "targets": [{"refId": "A", "expr": "rate(nv_inference_requests_success[5m])"},
                                      {"refId": "B", "expr": "sum(rate(nv_inference_requests_success[1m]))"}]},
        {"title": "Broken", "targets": [{"refId": "A", "expr": "rate(nv_inference_count[5m]"}]},
        {"title": "Recorded", "targets": [{"refId": "A", "expr": "triton:queue_share"}]},
        {"title": "GPU", "targets": [{"refId": "A", "expr": "nv_gpu_utilization"}]},
    ]
    path = tmp_path / "dashboard.json"
    path.write_text(json.dumps({"title": "t", "panels": panels}))
    return load_dashboard(path)


def test_dashboard_queries_are_judged_each_missing_metric_named_once(dashboard):
    live = {"nv_inference_request_success", "nv_inference_count", "nv_inference_queue_duration_us"}
    judge = MetricJudge(live, {"triton:queue_share": ["nv_inference_queue_duration_us"]}, NO_GPU)
    review = review_queries(dashboard, judge)
    assert review.unparsed == 1
    assert review.missing == {"nv_inference_requests_success"}
    rules = [(f.rule, f.severity, f.message.split(":")[0]) for f in review.findings]
    assert rules == [("MON-3 metric exists", "error", "panel 'Typo' query A"),
                     ("MON-3 parse", "error", "panel 'Broken' query A is not valid PromQL"),
                     ("MON-3 metric exists", "info", "panel 'GPU' query A")]
    assert SERVICE_HEALTH in review.covered
    assert panels_by_layer(dashboard, judge).splitlines()[LAYERS.index(SERVICE_HEALTH)].startswith(
        f"{SERVICE_HEALTH}: ")


def test_recording_rules_are_read_and_an_unreadable_rule_file_is_left_to_mon2(tmp_path):
    rules = tmp_path / "rules.yaml"
    rules.write_text("groups:\n- name: g\n  rules:\n  - record: triton:success_rate\n"
                     "    expr: rate(nv_inference_request_success[5m])\n")
    broken = tmp_path / "broken.yaml"
    broken.write_text("groups: [\n")
    assert recordings_of([rules, broken, tmp_path / "absent.yaml"]) == {
        "triton:success_rate": ["nv_inference_request_success"]}
