"""Fleet: several replicas behind a load balancer (`--triton-url` is the balancer, `fleet:` names
the replicas). Per replica: live, ready, every model READY and answering (CFG-1), metrics reachable
and moving (MON-1). Across replicas: the same models, versions and configuration (CFG-5). For the
fleet: the balancer spreads traffic as its weights say and the fleet's capacity is close to the sum
of its replicas' (PERF-6); one replica dies under traffic (PERF-4). Without `fleet:` replicas every
check here is NOT APPLICABLE, unless the URL is seen to reach several servers (a statistics counter
goes backwards between reads): then there is a fleet the settings do not name, and every check
here is INCOMPLETE with that evidence. See docs/fleet.md.
"""

import json
import time

import pytest

from pytest_triton_ready import progress
from pytest_triton_ready.client import TritonClient
from pytest_triton_ready.faults.experiment import run_experiment
from pytest_triton_ready.faults.recording import record_outcome
from pytest_triton_ready.fleet import DiscoveryError, resolve
from pytest_triton_ready.fleet.consistency import compare, read_view
from pytest_triton_ready.fleet.death import ReplicaDeath, judge_replica_death
from pytest_triton_ready.fleet.spread import Capacity, read_counters, spread
from pytest_triton_ready.load.server_side import several_servers
from pytest_triton_ready.metrics import CORE_FAMILIES, MetricsError, scrape
from pytest_triton_ready.models import ready_models


class FleetUnderTest:
    """The resolved fleet, a direct client per replica, and the model the fleet is loaded with."""

    def __init__(self, fleet, settings):
        self.fleet = fleet
        self.settings = settings
        self.section = fleet.section
        self.clients = {r.name: TritonClient(r.http_url, r.grpc_url, settings.headers,
                                             settings.triton_request_timeout, settings.triton_dynamic_dim,
                                             settings.input_shapes, declared=settings.input_declarations())
                        for r in fleet.replicas}

    @property
    def replicas(self):
        return self.fleet.replicas

    def engine(self, replica):
        from pytest_triton_ready.load import LoadEngine

        return LoadEngine(self.clients[replica.name], replica.grpc_url, replica.http_url, self.settings.headers,
                          max(30.0, self.settings.triton_request_timeout), settings=self.settings)

    def choose_model(self, triton):
        """`fleet.models[0]`, else the first READY stateless model in scope on the balancer."""
        ready = {e["name"] for e in triton.client.repository_index() if e.get("state") == "READY"}
        if self.section.models:
            return self.section.models[0] if self.section.models[0] in ready else None
        for model in triton.models():
            if model not in ready:
                continue
            config = triton.client.model_config(model)
            if "sequence_batching" in config or (config.get("model_transaction_policy") or {}).get("decoupled"):
                continue
            return model
        return None

    def counters(self, models):
        timeout = self.settings.threshold("metrics_scrape_timeout_s").value
        return {r.name: read_counters(r, self.clients[r.name], models, self.settings.headers, timeout)
                for r in self.replicas}

    def close(self):
        for client in self.clients.values():
            client.close()


STATISTICS_READS = 6


class UndeclaredFleet(str):
    """Why the URL is known to reach several servers although the settings name no replicas."""


def _undeclared_fleet(triton):
    """One inference (so the servers' counters differ), then STATISTICS_READS reads of every model's
    statistics; a counter that goes backwards proves more than one server behind the URL."""
    if triton.owns_process:
        return None
    model = next(iter(ready_models(triton)), None)
    if model is not None:
        triton.client.infer(model)
    reads = []
    for _ in range(STATISTICS_READS):
        status, body = triton.client.raw("/v2/models/stats")
        if status != 200:
            return None
        reads.append(body)
    proof = several_servers(reads)
    return None if proof is None else UndeclaredFleet(
        f"{triton.endpoints.http_url} reaches more than one server ({STATISTICS_READS} reads of /v2/models/stats: "
        f"{proof}) but the settings name no replicas: name them under fleet.replicas, fleet.replicas_command or "
        "fleet.kubernetes (docs/fleet.md) so that each one is checked")


@pytest.fixture(scope="module")
def fleet(triton, triton_settings):
    """The fleet under test; None when the settings name no replicas and the URL shows one server;
    an UndeclaredFleet when it shows several."""
    try:
        resolved = resolve(triton_settings.section_model("fleet"), triton.endpoints.http_url,
                           triton.endpoints.grpc_url)
    except DiscoveryError as exc:
        yield exc
        return
    if resolved is None:
        yield _undeclared_fleet(triton)
        return
    under_test = FleetUnderTest(resolved, triton_settings)
    yield under_test
    under_test.close()


def _needs_fleet(fleet, check):
    if isinstance(fleet, DiscoveryError):
        check.incomplete(f"the fleet's replicas could not be found: {fleet}")
    if isinstance(fleet, UndeclaredFleet):
        check.incomplete(str(fleet))
    if fleet is None:
        check.not_applicable("no fleet: the settings name no replicas (fleet.replicas, fleet.replicas_command or "
                             "fleet.kubernetes)")
    check.evidence("replicas", "\n".join(f"{r.name}: http {r.http_url}, grpc {r.grpc_url}, metrics {r.metrics_url}, "
                                         f"weight {r.weight:g}" for r in fleet.replicas) + f"\n(from {fleet.fleet.source})")
    return fleet


@pytest.mark.triton_check("CFG-1")
def test_every_replica_live_ready_and_serving(fleet, triton, check):
    """Each replica, reached directly: /v2/health/live and /v2/health/ready answer 200, every model
    READY on the balancer is READY on it, and each answers a real inference."""
    fleet = _needs_fleet(fleet, check)
    models = sorted({e["name"] for e in triton.client.repository_index() if e.get("state") == "READY"}
                    & set(triton.models()))
    for replica in fleet.replicas:
        client = fleet.clients[replica.name]
        try:
            live = client.get_status("/v2/health/live")
            ready = client.get_status("/v2/health/ready")
        except Exception as exc:
            check.finding(f"replica {replica.name}: unreachable at {replica.http_url}: {exc}", model=replica.name)
            continue
        check.measure("live (HTTP 200)", live, "status", model=replica.name, threshold=200, comparison="==",
                      finding=f"replica {replica.name}: /v2/health/live answers {live}")
        check.measure("ready (HTTP 200)", ready, "status", model=replica.name, threshold=200, comparison="==",
                      finding=f"replica {replica.name}: /v2/health/ready answers {ready}")
        index = {e["name"]: e.get("state") for e in client.repository_index() if e.get("state") == "READY"}
        for model in models:
            if model not in index:
                check.finding(f"replica {replica.name}: model {model} is not READY (it is on the balancer)",
                              model=f"{replica.name}/{model}")
                continue
            outcome = client.infer(model)
            check.measure("inference latency", round(outcome.latency_s * 1000, 3), "ms", model=f"{replica.name}/{model}")
            if not outcome.ok:
                check.finding(f"replica {replica.name}: {model} inference failed: {outcome.error}",
                              model=f"{replica.name}/{model}")
    if check.errors:
        check.recommend("Take the replicas named above out of the balancer's rotation until they pass CFG-1 on "
                        "their own; a balancer that health-checks /v2/health/ready would have done so.")


@pytest.mark.triton_check("MON-1")
def test_every_replica_metrics_reachable_and_moving(fleet, triton, check):
    """Each replica's own metrics endpoint answers with the core nv_inference_* families, and its
    nv_inference_request_success rises after an inference sent to it directly."""
    fleet = _needs_fleet(fleet, check)
    timeout = check.threshold("metrics_scrape_timeout_s").value
    models = sorted({e["name"] for e in triton.client.repository_index() if e.get("state") == "READY"}
                    & set(triton.models()))
    for replica in fleet.replicas:
        try:
            before = scrape(replica.metrics_url, fleet.settings.headers, timeout)
        except MetricsError as exc:
            check.finding(f"replica {replica.name}: metrics endpoint {replica.metrics_url}: {exc}", model=replica.name)
            continue
        missing = before.missing(CORE_FAMILIES)
        check.measure("core nv_inference_* families missing", len(missing), "families", model=replica.name,
                      threshold=0, finding=f"replica {replica.name}: metric families missing: {', '.join(missing)}")
        if not models:
            continue
        outcome = fleet.clients[replica.name].infer(models[0])
        if not outcome.ok:
            check.finding(f"replica {replica.name}: the inference meant to move its counters failed: {outcome.error}",
                          model=replica.name)
            continue
        after = scrape(replica.metrics_url, fleet.settings.headers, timeout)
        rise = after.delta(before, "nv_inference_request_success", model=models[0])
        check.measure("nv_inference_request_success rise after 1 inference", rise, "requests",
                      model=f"{replica.name}/{models[0]}", threshold=1, comparison=">=",
                      finding=f"replica {replica.name}: nv_inference_request_success did not rise after an inference")


@pytest.mark.triton_check("CFG-5")
def test_replicas_serve_the_same_models_versions_and_config(fleet, triton, check):
    """Every replica serves the same models, the same READY versions and the same effective
    configuration, on the same server version. A difference names the replica and the field."""
    fleet = _needs_fleet(fleet, check)
    if len(fleet.replicas) < 2:
        check.not_applicable("a fleet of one replica has nothing to compare")
    views = [read_view(r.name, fleet.clients[r.name], triton.settings.triton_models or None) for r in fleet.replicas]
    for view in views:
        if view.error:
            check.finding(f"replica {view.replica}: could not be read: {view.error}", model=view.replica)
        else:
            check.measure("models served", len([m for m, v in view.versions.items() if v]), "models", model=view.replica)
    readable = [v for v in views if not v.error]
    if len(readable) < 2:
        check.incomplete("fewer than two replicas could be read; nothing to compare")
    differences = compare(views)
    check.measure("fields that differ between replicas", len(differences), "fields", threshold=0)
    for difference in differences:
        check.finding(difference.message(), model=", ".join(difference.outliers), rule="CFG-5",
                      value=difference.path)
    check.evidence("what each replica serves", json.dumps(
        {v.replica: {"server version": v.server_version, "READY versions": v.versions} for v in views}, indent=1))
    if differences:
        check.recommend("Finish (or roll back) the rollout so that every replica serves the same model versions "
                        "and configuration; a client cannot tell which replica answered.")


def _pick_model(fleet, triton, check):
    model = fleet.choose_model(triton)
    if model is None:
        check.incomplete("no READY stateless model to load the fleet with (set fleet.models)")
    return model


@pytest.mark.triton_check("PERF-6")
def test_balancer_spreads_traffic_across_replicas(fleet, triton, load, check):
    """Under load through the balancer, each replica's share of the requests (from its own
    nv_inference_request_success, with the statistics API as a cross-check) is within
    fleet_spread_max_deviation of its expected share (weight / sum of weights); no replica idles."""
    fleet = _needs_fleet(fleet, check)
    model = _pick_model(fleet, triton, check)
    before = fleet.counters([model])
    progress.step(f"through the balancer: {model} at concurrency {fleet.section.concurrency * len(fleet.replicas)} "
                  f"for {fleet.section.spread_s:g} s")
    traffic = load.closed_loop(model, fleet.section.concurrency * len(fleet.replicas),
                               duration_s=fleet.section.spread_s, bin_s=None)
    result = load.run(traffic)
    time.sleep(1.1)  # the metrics endpoint refreshes on Triton's metrics interval
    after = fleet.counters([model])
    found = spread(before, after, fleet.fleet.expected_shares())
    check.measure("requests through the balancer", result.stats.count_ok, "requests", model=model)
    check.measure("requests counted by the replicas", round(found.total), "requests", model=model)
    threshold = check.threshold("fleet_spread_max_deviation")
    for replica in fleet.replicas:
        if replica.name in found.unread:
            check.finding(f"replica {replica.name}: its counters could not be read: {found.unread[replica.name]}",
                          model=replica.name)
            continue
        check.measure("served requests", round(found.served[replica.name]), "requests", model=replica.name)
        check.measure("share of the traffic", round(found.shares[replica.name], 4), "ratio", model=replica.name)
        check.measure("deviation from the expected share", round(found.deviation(replica.name), 4), "ratio",
                      model=replica.name, threshold=threshold,
                      finding=f"replica {replica.name} served {found.shares[replica.name]:.1%} of the traffic; "
                              f"its expected share is {found.expected[replica.name]:.1%}")
    for name in found.idle:
        check.finding(f"replica {name} served no request while the fleet served {found.total:.0f}", model=name)
    check.evidence("spread", json.dumps(found.to_dict(), indent=1))
    if check.errors:
        check.recommend("Check the balancer's method and weights (nginx: least_conn / weight=; a Kubernetes Service "
                        "balances connections, not gRPC requests: use a gRPC-aware proxy or client-side balancing).")


@pytest.mark.triton_check("PERF-6")
def test_fleet_capacity_close_to_sum_of_replicas(fleet, triton, load, check):
    """Each replica alone (directly, closed loop at fleet.concurrency), then the whole fleet through
    the balancer (replicas x fleet.concurrency): the fleet's throughput is at least
    fleet_capacity_ratio_min of the sum of the replicas' throughputs."""
    fleet = _needs_fleet(fleet, check)
    model = _pick_model(fleet, triton, check)
    per_replica = {}
    problems = []
    for number, replica in enumerate(fleet.replicas, start=1):
        progress.step(f"replica {replica.name} alone: {model} at concurrency {fleet.section.concurrency} "
                      f"(replica {number} of {len(fleet.replicas)})")
        measured = fleet.engine(replica).measure(model, concurrency=fleet.section.concurrency)
        per_replica[replica.name] = measured.stats.throughput_infer_s
        check.measure("capacity alone", round(measured.stats.throughput_infer_s, 1), "infer/s",
                      model=f"{replica.name}/{model}")
        check.measure("p99 alone", measured.stats.p99_ms, "ms", model=f"{replica.name}/{model}")
        if not measured.trustworthy:
            problems.append(f"{replica.name}: {measured.problem()}")
    progress.step(f"the fleet through the balancer: {model} at concurrency "
                  f"{fleet.section.concurrency * len(fleet.replicas)}")
    through = load.measure(model, concurrency=fleet.section.concurrency * len(fleet.replicas))
    if not through.trustworthy:
        problems.append(f"through the balancer: {through.problem()}")
    capacity = Capacity(per_replica, through.stats.throughput_infer_s)
    check.measure("fleet capacity through the balancer", round(capacity.fleet, 1), "infer/s", model=model)
    check.measure("p99 through the balancer", through.stats.p99_ms, "ms", model=model)
    check.measure("sum of the replicas' capacities", round(capacity.sum, 1), "infer/s", model=model)
    check.evidence("capacity", json.dumps(capacity.to_dict(), indent=1))
    passed = check.measure("fleet / sum of replicas", None if capacity.ratio is None else round(capacity.ratio, 3),
                           "ratio", model=model, threshold=check.threshold("fleet_capacity_ratio_min"),
                           comparison=">=",
                           finding=f"the fleet served {capacity.fleet:.0f} infer/s through the balancer, "
                                   f"{capacity.ratio or 0:.0%} of the {capacity.sum:.0f} infer/s its replicas "
                                   "serve one by one")
    if not passed:
        check.recommend("Find what the fleet shares: the balancer's own CPU or connection limits (nginx "
                        "worker_processes, keepalive to the upstreams), a host that runs several replicas, or "
                        "a load generator that cannot drive the whole fleet (--triton-load-cluster).")
    if problems and not check.errors:
        check.incomplete("measurements not trustworthy: " + "; ".join(problems))


@pytest.mark.triton_check("PERF-4", run_last=True)
def test_replica_death_under_traffic(fleet, triton, load, check):
    """One replica dies under open-loop traffic through the balancer (its declared kill action):
    at most fleet_death_lost_fraction_max of the requests after the kill fail, and the balancer
    stops sending requests that fail within fleet_death_reroute_max_s; the survivors serve the rest.
    A kill that did not take (the replica kept answering, nothing failed) is INCOMPLETE."""
    fleet = _needs_fleet(fleet, check)
    if len(fleet.replicas) < 2:
        check.not_applicable("a fleet of one replica cannot lose one and keep serving")
    try:
        replica = fleet.fleet.replica(fleet.section.death_replica or fleet.replicas[-1].name)
    except KeyError as exc:
        check.incomplete(str(exc.args[0]))
    success_min = check.threshold("success_rate_min")
    outcome = run_experiment(ReplicaDeath(load, replica, _pick_model(fleet, triton, check), fleet.section,
                                          success_min.value))
    record_outcome(check, outcome, fleet.section.death_rate_per_s)
    if outcome.incomplete:
        check.incomplete(outcome.incomplete)
    judge_replica_death(check, outcome, success_min)
    if replica.restore is None:
        check.finding(f"replica {replica.name} was left dead: no restore action declared (fleet.restore_command)",
                      severity="warning", model=replica.name)
