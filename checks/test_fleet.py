"""Fleet: several replicas behind a load balancer (`--triton-url` is the balancer, `fleet:` names
the replicas). Per replica: live, ready, every model READY and answering (CFG-1), metrics reachable
and moving (MON-1). Across replicas: the same models, versions and configuration (CFG-5). For the
fleet: the balancer spreads traffic as its weights say and the fleet's capacity is close to the sum
of its replicas' (PERF-6); one replica dies under traffic (PERF-4). Without `fleet:` replicas every
check here is NOT APPLICABLE, unless the URL is seen to reach several servers (a statistics counter
goes backwards between reads): then there is a fleet the settings do not name, and every check
here is INCOMPLETE with that evidence. See docs/fleet.md.
"""

import pytest

from pytest_triton_ready.faults.experiment import run_experiment
from pytest_triton_ready.faults.recording import record_outcome
from pytest_triton_ready.fleet.balancing import measure_capacity, measure_spread, record_capacity, record_spread
from pytest_triton_ready.fleet.consistency import read_view, record_consistency
from pytest_triton_ready.fleet.death import ReplicaDeath, judge_replica_death
from pytest_triton_ready.fleet.per_replica import record_metrics, record_serving
from pytest_triton_ready.fleet.under_test import (
    FleetUnderTest,
    fleet_of,
    models_on_balancer,
    require_fleet,
    require_model,
)


@pytest.fixture(scope="module")
def fleet(triton, triton_settings):
    """The fleet under test (fleet/under_test.py): the replicas with a client each; a DiscoveryError
    when they could not be found; None when the settings name no replicas and the URL shows one
    server; an UndeclaredFleet when it shows several. The replicas' clients close after the module."""
    found = fleet_of(triton, triton_settings)
    yield found
    if isinstance(found, FleetUnderTest):
        found.close()


@pytest.mark.triton_check("CFG-1")
def test_every_replica_live_ready_and_serving(fleet, triton, check):
    """Each replica, reached directly: /v2/health/live and /v2/health/ready answer 200, every model
    READY on the balancer is READY on it, and each answers a real inference."""
    record_serving(check, require_fleet(fleet, check), models_on_balancer(triton))


@pytest.mark.triton_check("MON-1")
def test_every_replica_metrics_reachable_and_moving(fleet, triton, check):
    """Each replica's own metrics endpoint answers with the core nv_inference_* families, and its
    nv_inference_request_success rises after an inference sent to it directly."""
    record_metrics(check, require_fleet(fleet, check), models_on_balancer(triton),
                   check.threshold("metrics_scrape_timeout_s").value)


@pytest.mark.triton_check("CFG-5")
def test_replicas_serve_the_same_models_versions_and_config(fleet, triton, check):
    """Every replica serves the same models, the same READY versions and the same effective
    configuration, on the same server version. A difference names the replica and the field."""
    fleet = require_fleet(fleet, check)
    if len(fleet.replicas) < 2:
        check.not_applicable("a fleet of one replica has nothing to compare")
    scope = triton.settings.triton_models or None
    record_consistency(check, [read_view(r.name, fleet.clients[r.name], scope) for r in fleet.replicas])


@pytest.mark.triton_check("PERF-6")
def test_balancer_spreads_traffic_across_replicas(fleet, triton, load, check):
    """Under load through the balancer, each replica's share of the requests (from its own
    nv_inference_request_success, with the statistics API as a cross-check) is within
    fleet_spread_max_deviation of its expected share (weight / sum of weights); no replica idles."""
    fleet = require_fleet(fleet, check)
    model = require_model(fleet, triton, check)
    found, through_balancer = measure_spread(fleet, load, model)
    record_spread(check, found, through_balancer, model)


@pytest.mark.triton_check("PERF-6")
def test_fleet_capacity_close_to_sum_of_replicas(fleet, triton, load, check):
    """Each replica alone (directly, closed loop at fleet.concurrency), then the whole fleet through
    the balancer (replicas x fleet.concurrency): the fleet's throughput is at least
    fleet_capacity_ratio_min of the sum of the replicas' throughputs."""
    fleet = require_fleet(fleet, check)
    model = require_model(fleet, triton, check)
    capacity, problems = measure_capacity(check, fleet, load, model)
    record_capacity(check, capacity, problems, model)


@pytest.mark.triton_check("PERF-4", run_last=True)
def test_replica_death_under_traffic(fleet, triton, load, check):
    """One replica dies under open-loop traffic through the balancer (its declared kill action):
    at most fleet_death_lost_fraction_max of the requests after the kill fail, and the balancer
    stops sending requests that fail within fleet_death_reroute_max_s; the survivors serve the rest.
    A kill that did not take (the replica kept answering, nothing failed) is INCOMPLETE."""
    fleet = require_fleet(fleet, check)
    if len(fleet.replicas) < 2:
        check.not_applicable("a fleet of one replica cannot lose one and keep serving")
    try:
        replica = fleet.fleet.replica(fleet.section.death_replica or fleet.replicas[-1].name)
    except KeyError as exc:
        check.incomplete(str(exc.args[0]))
    success_min = check.threshold("success_rate_min")
    outcome = run_experiment(ReplicaDeath(load, replica, require_model(fleet, triton, check), fleet.section,
                                          success_min.value))
    record_outcome(check, outcome, fleet.section.death_rate_per_s)
    if outcome.incomplete:
        check.incomplete(outcome.incomplete)
    judge_replica_death(check, outcome, success_min)
    if replica.restore is None:
        check.finding(f"replica {replica.name} was left dead: no restore action declared (fleet.restore_command)",
                      severity="warning", model=replica.name)
