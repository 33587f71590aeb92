"""Fleet logic without a server: the `fleet:` section, replicas from a list, a command and
Kubernetes Endpoints (the official client's own model objects, served by a stand-in CoreV1Api:
no cluster exists here), consistency across replicas, spread and capacity arithmetic, the
replica-death timeline analysis."""

from __future__ import annotations

import json
import sys
from types import SimpleNamespace

import pytest

from pytest_triton_ready.fleet.balancing import record_capacity, record_spread
from pytest_triton_ready.fleet.consistency import ReplicaView, flatten, record_consistency, replica_differences
from pytest_triton_ready.fleet.death import DeathOutcome, analyse
from pytest_triton_ready.fleet.discovery import resolve_fleet
from pytest_triton_ready.fleet.spread import FleetCapacity, ReplicaCounters, spread
from pytest_triton_ready.fleet.targets import DiscoveryError, FleetSection
from pytest_triton_ready.fleet.under_test import (
    FleetUnderTest,
    UndeclaredFleet,
    models_on_balancer,
    require_fleet,
    require_model,
    undeclared_fleet,
)
from pytest_triton_ready.load.timeline import Bin
from pytest_triton_ready.record.model import Result, Verdict
from pytest_triton_ready.record.recorder import CheckRecorder
from pytest_triton_ready.settings import SettingsError, build_settings


def section(**data):
    return FleetSection.model_validate(data)


def test_replicas_from_urls_and_mappings_get_every_endpoint():
    fleet = resolve_fleet(section(replicas=["http://10.0.0.1:8000",
                                      {"name": "b", "http_url": "http://10.0.0.2:9000", "grpc_url": "10.0.0.2:9001",
                                       "metrics_url": "http://10.0.0.2:9002/metrics", "weight": 3}]),
                    "http://lb:8000", "lb:8001")
    a, b = fleet.replicas
    assert (a.name, a.grpc_url, a.metrics_url) == ("10.0.0.1:8000", "10.0.0.1:8001", "http://10.0.0.1:8002/metrics")
    assert (b.name, b.grpc_url, b.weight) == ("b", "10.0.0.2:9001", 3.0)
    assert fleet.expected_shares() == {"10.0.0.1:8000": 0.25, "b": 0.75}


def test_no_replicas_is_no_fleet_and_two_sources_are_refused():
    assert resolve_fleet(section(), "http://lb:8000", "lb:8001") is None
    with pytest.raises(ValueError, match="one way"):
        section(replicas=["http://a:8000"], replicas_command="echo x")


def test_replicas_from_a_command_and_its_failures_in_one_line():
    command = f"{sys.executable} -c \"print('http://127.0.0.1:8000 http://127.0.0.1:9000')\""
    fleet = resolve_fleet(section(replicas_command=command), "http://lb:8000", "lb:8001")
    assert [r.port for r in fleet.replicas] == [8000, 9000]
    with pytest.raises(DiscoveryError, match="exited with code 3"):
        resolve_fleet(section(replicas_command=f"{sys.executable} -c \"import sys; sys.exit(3)\""), "http://lb", "lb:1")
    with pytest.raises(DiscoveryError, match="printed no replica URL"):
        resolve_fleet(section(replicas_command="true"), "http://lb", "lb:1")


def test_a_yaml_fleet_section_is_validated_with_file_and_line(tmp_path):
    config = tmp_path / "t.yaml"
    config.write_text("fleet:\n  replicas: [http://a:8000]\n  spread_s: -1\n")
    with pytest.raises(SettingsError, match=r"t.yaml:3"):
        build_settings({}, {}, environ={}, config_file=str(config))
    config.write_text("fleet:\n  load_cluster: nowhere\n")
    with pytest.raises(SettingsError, match="ray://HOST:PORT"):
        build_settings({}, {}, environ={}, config_file=str(config))


def test_load_cluster_option_accepts_auto_ray_and_gcs_addresses():
    for good in ("auto", "ray://10.0.0.5:10001", "head.cluster:6379"):
        assert build_settings({"triton_load_cluster": good}, {}, environ={}).triton_load_cluster == good
    with pytest.raises(SettingsError, match="--triton-load-cluster"):
        build_settings({"triton_load_cluster": "http://x:1"}, {}, environ={})


def k8s_endpoints():
    from kubernetes.client import CoreV1EndpointPort, V1EndpointAddress, V1Endpoints, V1EndpointSubset, V1ObjectMeta, V1ObjectReference

    return V1Endpoints(metadata=V1ObjectMeta(name="triton", namespace="serving"), subsets=[V1EndpointSubset(
        addresses=[V1EndpointAddress(ip="10.1.0.4", target_ref=V1ObjectReference(kind="Pod", name="triton-0")),
                   V1EndpointAddress(ip="10.1.0.5", target_ref=V1ObjectReference(kind="Pod", name="triton-1"))],
        not_ready_addresses=[V1EndpointAddress(ip="10.1.0.6")],
        ports=[CoreV1EndpointPort(name="http", port=8000), CoreV1EndpointPort(name="grpc", port=8001),
               CoreV1EndpointPort(name="metrics", port=8002)])])


class FakeCoreV1:
    def __init__(self, answer):
        self.answer = answer
        self.asked = []

    def read_namespaced_endpoints(self, name, namespace):
        self.asked.append((namespace, name))
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


def test_kubernetes_discovery_reads_ready_addresses_of_the_service_endpoints():
    pytest.importorskip("kubernetes")
    api = FakeCoreV1(k8s_endpoints())
    fleet = resolve_fleet(section(kubernetes={"namespace": "serving", "service": "triton"}), "http://lb:8000", "lb:8001",
                    kubernetes_api=api)
    assert api.asked == [("serving", "triton")]
    assert [(r.name, r.http_url, r.grpc_url, r.metrics_url) for r in fleet.replicas] == [
        ("triton-0", "http://10.1.0.4:8000", "10.1.0.4:8001", "http://10.1.0.4:8002/metrics"),
        ("triton-1", "http://10.1.0.5:8000", "10.1.0.5:8001", "http://10.1.0.5:8002/metrics")]
    assert "Kubernetes Endpoints serving/triton" in fleet.source


def test_kubernetes_discovery_errors_are_one_line():
    pytest.importorskip("kubernetes")
    from kubernetes.client import V1Endpoints
    from kubernetes.client.exceptions import ApiException

    kube = section(kubernetes={"namespace": "serving", "service": "triton"})
    with pytest.raises(DiscoveryError, match="cannot read Endpoints serving/triton: 404 Not Found"):
        resolve_fleet(kube, "http://lb", "lb:1", kubernetes_api=FakeCoreV1(ApiException(status=404, reason="Not Found")))
    with pytest.raises(DiscoveryError, match="no ready address"):
        resolve_fleet(kube, "http://lb", "lb:1", kubernetes_api=FakeCoreV1(V1Endpoints(subsets=[])))


def view(name, versions, config):
    return ReplicaView(name, {"m": versions}, {"m": config}, "2.51.0")


def test_consistency_names_the_replica_and_the_field():
    base = {"name": "m", "max_batch_size": 8, "dynamic_batching": {"max_queue_delay_microseconds": 100}}
    drifted = {**base, "dynamic_batching": {"max_queue_delay_microseconds": 500}}
    found = replica_differences([view("r1", ["1"], base), view("r2", ["1"], base), view("r3", ["2"], drifted)])
    messages = [d.message() for d in found]
    assert "replica r3 has m: READY versions = 2 where r1, r2 have 1" in messages[0]
    assert any("r3" in m and "dynamic_batching.max_queue_delay_microseconds = 500" in m for m in messages)
    assert replica_differences([view("r1", ["1"], base), view("r2", ["1"], dict(base))]) == []
    tie = replica_differences([view("r1", ["1"], base), view("r2", ["2"], base)])
    assert tie[0].outliers == ("r1", "r2") and "differs between replicas" in tie[0].message()


def test_flatten_keeps_lists_of_mappings_by_index():
    assert flatten({"instance_group": [{"count": 2}], "dims": [1, 2]}) == {"dims": "[1, 2]",
                                                                         "instance_group[0].count": "2"}


def test_spread_from_counter_deltas_and_capacity_ratio():
    before = {r: ReplicaCounters({"m": 100.0}, {"m": 100}) for r in ("a", "b")}
    after = {"a": ReplicaCounters({"m": 400.0}, {"m": 400}), "b": ReplicaCounters({"m": 200.0}, {"m": 200})}
    found = spread(before, after, {"a": 0.5, "b": 0.5})
    assert found.served == {"a": 300.0, "b": 100.0}
    assert found.shares == {"a": 0.75, "b": 0.25}
    assert found.max_deviation == pytest.approx(0.5)
    idle = spread(before, {"a": after["a"], "b": before["b"]}, {"a": 0.5, "b": 0.5})
    assert idle.idle == ["b"]
    assert FleetCapacity({"a": 100.0, "b": 100.0}, 150.0).ratio == 0.75


def fleet_recorder(check_id="PERF-6", **thresholds):
    return CheckRecorder(Result(check_id, "fleet", "test", "t"), build_settings({}, {}, environ={}), thresholds)


def test_an_even_spread_passes_and_an_idle_or_unread_replica_fails_naming_it():
    before = {r: ReplicaCounters({"m": 0.0}, {"m": 0}) for r in ("a", "b")}
    even = spread(before, {r: ReplicaCounters({"m": 100.0}, {"m": 100}) for r in ("a", "b")}, {"a": 0.5, "b": 0.5})
    check = fleet_recorder(fleet_spread_max_deviation=0.25)
    record_spread(check, even, 200, "m")
    assert not check.failed and check.judged
    lopsided = spread(before, {"a": ReplicaCounters({"m": 200.0}, {"m": 200}), "b": before["b"]}, {"a": 0.5, "b": 0.5})
    check = fleet_recorder(fleet_spread_max_deviation=0.25)
    record_spread(check, lopsided, 200, "m")
    assert "replica b served no request while the fleet served 200" in check.failure_text()
    assert "replica a served 100.0% of the traffic; its expected share is 50.0%" in check.failure_text()
    unread = spread(before, {"a": ReplicaCounters({"m": 100.0}, {"m": 100})}, {"a": 0.5, "b": 0.5})
    check = fleet_recorder(fleet_spread_max_deviation=0.25)
    record_spread(check, unread, 100, "m")
    assert "replica b: its counters could not be read: not read" in check.failure_text()


def test_a_fleet_below_the_sum_of_its_replicas_fails_and_untrustworthy_numbers_are_incomplete():
    check = fleet_recorder(fleet_capacity_ratio_min=0.8)
    record_capacity(check, FleetCapacity({"a": 100.0, "b": 100.0}, 190.0), [], "m")
    assert not check.failed and check.judged
    check = fleet_recorder(fleet_capacity_ratio_min=0.8)
    record_capacity(check, FleetCapacity({"a": 100.0, "b": 100.0}, 120.0), ["a: unstable"], "m")
    assert "the fleet served 120 infer/s through the balancer, 60% of the 200 infer/s" in check.failure_text()
    assert check.result.verdict != Verdict.INCOMPLETE  # a failure stands over an untrustworthy number
    check = fleet_recorder(fleet_capacity_ratio_min=0.8)
    with pytest.raises(pytest.skip.Exception):
        record_capacity(check, FleetCapacity({"a": 100.0}, 95.0), ["a: unstable"], "m")
    assert check.result.reason == "measurements not trustworthy: a: unstable"


def test_consistency_onto_a_check_fails_on_a_drift_and_is_incomplete_with_one_readable_replica():
    base = {"name": "m", "max_batch_size": 8}
    check = fleet_recorder("CFG-5")
    record_consistency(check, [view("r1", ["1"], base), view("r2", ["2"], base), view("r3", ["1"], base)])
    assert check.failed and "replica r2 has m: READY versions = 2" in check.failure_text()
    check = fleet_recorder("CFG-5")
    record_consistency(check, [view("r1", ["1"], base), view("r2", ["1"], base)])
    assert not check.failed and check.judged
    check = fleet_recorder("CFG-5")
    broken = ReplicaView("r2", {}, {}, None, error="connection refused")
    with pytest.raises(pytest.skip.Exception):
        record_consistency(check, [view("r1", ["1"], base), broken])
    assert check.result.reason == "fewer than two replicas could be read; nothing to compare"
    assert "replica r2: could not be read: connection refused" in [f.message for f in check.result.findings]


class RecordedServer:
    """A server's recorded answers: its repository index, model configs and /v2/models/stats reads."""

    def __init__(self, index, configs=None, stats_reads=(), owns_process=False):
        self.client = self
        self.index, self.configs, self.stats_reads = index, configs or {}, list(stats_reads)
        self.owns_process = owns_process
        self.endpoints = SimpleNamespace(http_url="http://lb:8000")
        self.inferred = []

    def repository_index(self):
        return self.index

    def models(self):
        return [e["name"] for e in self.index]

    def model_config(self, model):
        return self.configs.get(model, {})

    def infer(self, model):
        self.inferred.append(model)

    def raw(self, path):
        return (200, self.stats_reads.pop(0)) if self.stats_reads else (503, None)


def test_the_fleet_is_loaded_with_the_declared_model_or_the_first_ready_stateless_one():
    server = RecordedServer([{"name": "seq", "state": "READY"}, {"name": "llm", "state": "READY"},
                             {"name": "gone", "state": "UNAVAILABLE"}, {"name": "scale", "state": "READY"}],
                            {"seq": {"sequence_batching": {}}, "llm": {"model_transaction_policy": {"decoupled": True}}})
    fleet = FleetUnderTest.__new__(FleetUnderTest)
    fleet.section = section(replicas=["http://a:8000"])
    assert fleet.choose_model(server) == "scale"
    fleet.section = section(replicas=["http://a:8000"], models=["gone"])
    check = fleet_recorder()
    with pytest.raises(pytest.skip.Exception):
        require_model(fleet, server, check)
    assert check.result.reason == "no READY stateless model to load the fleet with (set fleet.models)"
    assert models_on_balancer(server) == ["llm", "scale", "seq"]


def test_no_fleet_is_not_applicable_and_an_unfound_or_undeclared_one_is_incomplete():
    check = fleet_recorder("CFG-1")
    with pytest.raises(pytest.skip.Exception):
        require_fleet(None, check)
    assert check.result.verdict == Verdict.NOT_APPLICABLE
    check = fleet_recorder("CFG-1")
    with pytest.raises(pytest.skip.Exception):
        require_fleet(DiscoveryError("kubectl: not found"), check)
    assert check.result.reason == "the fleet's replicas could not be found: kubectl: not found"
    check = fleet_recorder("CFG-1")
    with pytest.raises(pytest.skip.Exception):
        require_fleet(UndeclaredFleet("http://lb:8000 reaches more than one server"), check)
    assert (check.result.verdict, check.result.reason) == (Verdict.INCOMPLETE, "http://lb:8000 reaches more than one server")


def _stats(success: int) -> bytes:
    return json.dumps({"model_stats": [{"name": "scale", "version": "1",
                                        "inference_stats": {"success": {"count": success}}}]}).encode()


def test_a_statistics_counter_that_goes_backwards_proves_an_undeclared_fleet():
    index = [{"name": "scale", "state": "READY"}]
    several = RecordedServer(index, stats_reads=[_stats(5), _stats(9), _stats(5), _stats(9), _stats(5), _stats(9)])
    found = undeclared_fleet(several)
    assert isinstance(found, UndeclaredFleet) and "reaches more than one server (6 reads" in found
    assert several.inferred == ["scale"]
    assert undeclared_fleet(RecordedServer(index, stats_reads=[_stats(5)] * 6)) is None
    assert undeclared_fleet(RecordedServer(index, owns_process=True)) is None  # a server this run started
    assert undeclared_fleet(RecordedServer(index, stats_reads=[_stats(5)])) is None  # stats not readable


def test_death_analysis_counts_losses_after_the_kill_and_the_reroute_time():
    bins = [Bin(round(i * 0.1, 1), 6, 0, 0, 1.0, 2.0) for i in range(20)]
    bins[12] = Bin(1.2, 3, 3, 0, 1.0, 2.0)
    bins[15] = Bin(1.5, 5, 1, 0, 1.0, 2.0)
    outcome = DeathOutcome("replica death", "m", replica="r1", kill_command="kill")
    analyse(bins, 1.0, outcome)
    assert (outcome.lost_after, outcome.attempted_after) == (4, 10 * 6)
    assert outcome.reroute_s == pytest.approx(0.6)
    assert outcome.after_reroute_success_rate == 1.0 and outcome.steady_success_rate == 1.0
    clean = DeathOutcome("replica death", "m", replica="r1", kill_command="kill")
    analyse([Bin(0.1 * i, 5, 0, 0, 1.0, 1.0) for i in range(10)], 0.5, clean)
    assert clean.reroute_s == 0.0 and clean.lost_after == 0


def test_ray_workers_are_placed_one_per_node_or_per_declared_resource():
    pytest.importorskip("ray")
    from pytest_triton_ready.load.ray_workers import RESOURCE, _placements

    nodes = [{"Alive": True, "NodeID": "a" * 56, "NodeManagerAddress": "10.0.0.1", "Resources": {"CPU": 4}},
             {"Alive": True, "NodeID": "b" * 56, "NodeManagerAddress": "10.0.0.2", "Resources": {"CPU": 4}},
             {"Alive": False, "NodeID": "c" * 56, "NodeManagerAddress": "10.0.0.3", "Resources": {}}]
    assert [p["node_ip"] for p in _placements(SimpleNamespace(nodes=lambda: nodes))] == ["10.0.0.1", "10.0.0.2"]
    nodes[0]["Resources"][RESOURCE] = 2
    placed = _placements(SimpleNamespace(nodes=lambda: nodes))
    assert [p["resources"] for p in placed] == [{RESOURCE: 1}, {RESOURCE: 1}]
