"""Fleet checks against a real fleet: three embedded tritonservers on loopback behind a real nginx
(HTTP through proxy_pass, gRPC through grpc_pass on a separate HTTP/2 port). One replica serves
another version of the model: CFG-5 must name it. The same run measures the spread from each
replica's counters, the fleet's capacity, and the death of a replica under traffic (PERF-4)."""

from __future__ import annotations

import shutil

import pytest
import yaml
from fleet_fixture import start_fleet

from conftest import QUICK_CHECKLIST

pytestmark = pytest.mark.skipif(shutil.which("nginx") is None,
                                reason="nginx is not installed (apt-get install nginx; .ci/run does)")


@pytest.fixture(scope="module")
def drifted_fleet(tmp_path_factory):
    """replica-1 and replica-2 serve identity version 1, replica-3 version 2 (a half-finished rollout)."""
    fleet = start_fleet(tmp_path_factory.mktemp("fleet"), versions=[1, 1, 2])
    yield fleet
    fleet.close()


def measurement(result, name, model=None):
    for m in result["measurements"]:
        if m["name"] == name and (model is None or m.get("model") == model):
            return m
    raise AssertionError(f"no measurement {name!r} for {model!r} in {result['check_id']}")


def test_fleet_behind_nginx_version_drift_spread_capacity_and_replica_death(drifted_fleet, run_checklist, tmp_path):
    fleet = drifted_fleet
    config = tmp_path / "fleet.yaml"
    settings = yaml.safe_load(QUICK_CHECKLIST.read_text())
    settings["thresholds"]["fleet_capacity_ratio_min"] = 0.2  # one 2-core host runs every replica and nginx
    settings.update(yaml.safe_load(fleet.yaml(
        "  concurrency: 4\n  spread_s: 2\n  death_rate_per_s: 60\n  death_steady_s: 1.5\n"
        "  death_observe_s: 4\n  death_replica: replica-1\n")))
    config.write_text(yaml.safe_dump(settings))
    first = fleet.launchers["replica-1"].endpoints
    run = run_checklist("test_fleet.py", url=None, args=(
        f"--triton-url={fleet.nginx.http_url}", f"--triton-grpc-url={fleet.nginx.grpc_url}",
        f"--triton-metrics-url={first.metrics_url}", f"--triton-config={config}",
        "--triton-allow=saturate,faults", "--triton-progress-after=0.5"))  # attached: load and a death allowed
    output = run.outcome.stdout.str()
    # the long fleet checks say what they are doing: each replica alone, then the replica death's phases
    assert all(f"replica {name} alone: " in output for name in fleet.launchers), output[-3000:]
    assert "replica death (replica-1): killed; 4 s of traffic through the survivors" in output
    report = run.report
    print(output[-3000:])

    # every replica reached directly: live, ready, serving, metrics moving
    cfg1 = run.result("test_every_replica_live_ready_and_serving")
    assert cfg1["verdict"] == "pass", cfg1
    assert {m["model"] for m in cfg1["measurements"] if m["name"] == "ready (HTTP 200)"} == set(fleet.launchers)
    mon1 = run.result("test_every_replica_metrics_reachable_and_moving")
    assert mon1["verdict"] == "pass", mon1

    # the half-finished rollout is caught, naming the replica and the field
    cfg5 = run.result("test_replicas_serve_the_same_models_versions_and_config")
    assert cfg5["verdict"] == "fail"
    messages = [f["message"] for f in cfg5["findings"] if f["severity"] == "error"]
    assert any("replica-3" in m and "READY versions" in m and "identity" in m for m in messages), messages

    # spread from each replica's own counters
    spread = run.result("test_balancer_spreads_traffic_across_replicas")
    shares = {m["model"]: m["value"] for m in spread["measurements"] if m["name"] == "share of the traffic"}
    assert set(shares) == set(fleet.launchers) and abs(sum(shares.values()) - 1) < 0.01, shares
    assert all(v > 0 for v in shares.values()), shares
    served = measurement(spread, "requests counted by the replicas")["value"]
    through = measurement(spread, "requests through the balancer")["value"]
    assert served >= through > 0

    capacity = run.result("test_fleet_capacity_close_to_sum_of_replicas")
    assert measurement(capacity, "fleet capacity through the balancer")["value"] > 0
    assert measurement(capacity, "fleet / sum of replicas")["value"] is not None

    # a replica dies under traffic through the balancer
    death = run.result("test_replica_death_under_traffic")
    assert death["verdict"] in ("pass", "fail"), death
    lost = measurement(death, "requests lost after the kill", "replica-1")
    reroute = measurement(death, "time until the balancer stopped routing to the dead replica", "replica-1")
    assert lost["value"] is not None and reroute["value"] is not None
    assert measurement(death, "requests after the kill", "replica-1")["value"] > 100
    assert fleet.launchers["replica-1"].exit_code() is not None  # it really died
    assert report["verdict"] == "NOT READY"


def test_metrics_of_one_replica_behind_the_balancer_still_see_the_counter_move(drifted_fleet, run_checklist):
    """A run given the balancer's URL and one replica's metrics endpoint (no fleet section): one
    inference in N reaches that replica, so MON-1 sends until the counter moves and says why."""
    fleet = drifted_fleet
    watched = fleet.launchers["replica-3"].endpoints
    run = run_checklist("test_monitoring.py", url=None, args=(
        "-k", "reachable_and_moving", f"--triton-url={fleet.nginx.http_url}",
        f"--triton-grpc-url={fleet.nginx.grpc_url}", f"--triton-metrics-url={watched.metrics_url}"))
    mon1 = run.result("test_metrics_endpoint_reachable_and_moving")
    assert mon1["verdict"] == "pass", mon1
    sent = measurement(mon1, "inferences sent until nv_inference_request_success rose", "identity")["value"]
    assert 1 <= sent <= 8
    spread_note = [f for f in mon1["findings"] if "rose only after" in f["message"]]
    assert bool(spread_note) == (sent > 1), mon1["findings"]


def test_a_balancer_without_a_fleet_section_leaves_the_fleet_checks_incomplete(drifted_fleet, run_checklist):
    """Given only the balancer's URL, the fleet checks used to say 'not applicable: no fleet' and the
    run could be READY with three replicas never compared. Counters that go backwards between reads
    of the statistics prove several servers: every fleet check is INCOMPLETE, saying so."""
    fleet = drifted_fleet
    run = run_checklist("test_fleet.py", url=None, args=(
        f"--triton-url={fleet.nginx.http_url}", f"--triton-grpc-url={fleet.nginx.grpc_url}"))
    results = [r for r in run.report["results"] if "test_fleet.py" in r["nodeid"]]
    assert results and all(r["verdict"] == "incomplete" for r in results), [(r["nodeid"], r["verdict"]) for r in results]
    assert all("reaches more than one server" in r["reason"] and "fleet.replicas" in r["reason"] for r in results)
    assert run.report["verdict"] == "INCOMPLETE"


def test_one_server_without_a_fleet_section_leaves_the_fleet_checks_not_applicable(run_checklist):
    run = run_checklist("test_fleet.py", args=("-k", "spreads_traffic"))
    spread = run.result("test_balancer_spreads_traffic_across_replicas")
    assert spread["verdict"] == "not_applicable" and spread["reason"].startswith("no fleet"), spread
