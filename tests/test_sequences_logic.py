"""Sequence models get real sequences, without a server: START, middle steps and END on one
correlation id (numeric or string as the config's CORRID control says), no more live sequences
than the scheduler holds, and the stateful check that catches state mixed between sequences."""

from __future__ import annotations

import asyncio
from collections import defaultdict

import numpy as np

from pytest_triton_ready.inputs import InputDeclarations, synthesize_inputs
from pytest_triton_ready.load.requests import RequestPool, build_pool, sequence_plan, string_corrid
from pytest_triton_ready.load.traffic import Traffic, TrafficPlan
from pytest_triton_ready.sequences import check_sequences
from pytest_triton_ready.server.client import InferOutcome

METADATA = {"name": "acc", "inputs": [{"name": "VALUE", "datatype": "INT32", "shape": [-1, 1]}],
            "outputs": [{"name": "TOTAL", "datatype": "INT32", "shape": [-1, 1]}]}


def _config(strategy="oldest", corrid="TYPE_UINT64"):
    batching = {"control_input": [{"name": "CORRID", "control": [{"kind": "CONTROL_SEQUENCE_CORRID", "data_type": corrid}]}]}
    batching[strategy] = {"max_candidate_sequences": 3} if strategy == "oldest" else {}
    return {"max_batch_size": 2, "sequence_batching": batching, "instance_group": [{"count": 2}]}


class _Client:
    """A stateful accumulator: per correlation id, or (mixing=True) one total for all."""

    dynamic_dim = 16
    input_shapes: dict = {}

    def __init__(self, config, mixing=False, sequence_length=5):
        self.config, self.mixing = config, mixing
        self.declared = InputDeclarations(sequence_length=sequence_length)
        self.totals: dict = {}

    def model_config(self, model):
        return self.config

    def model_metadata(self, model):
        return METADATA

    def is_sequence_model(self, model):
        return True

    def synthesize(self, model, batch_size=1, rng=None):
        return synthesize_inputs(METADATA, self.config, batch_size=batch_size, rng=rng)

    def infer(self, model, inputs, *, sequence_id=0, sequence_start=False, sequence_end=False, **_):
        key = "all" if self.mixing else sequence_id
        if sequence_start:
            self.totals[key] = 0
        elif key not in self.totals:
            return InferOutcome(model, False, 0.0, error=f"sequence {sequence_id} has no START")
        self.totals[key] += int(inputs["VALUE"].sum())
        return InferOutcome(model, True, 0.0, {"TOTAL": np.array([[self.totals[key]]], dtype=np.int32)}, inputs)


def _flags(prepared):
    from tritonclient.grpc import service_pb2

    request = service_pb2.ModelInferRequest.FromString(prepared.grpc)
    cid = request.parameters["sequence_id"]
    value = cid.string_param if cid.WhichOneof("parameter_choice") == "string_param" else cid.int64_param
    return value, request.parameters["sequence_start"].bool_param, request.parameters["sequence_end"].bool_param


def test_a_sequence_is_start_middle_steps_end_on_one_id():
    plan = sequence_plan(_Client(_config()), "acc", rng=np.random.default_rng(0))
    assert (plan.strategy, plan.live, plan.string_ids) == ("oldest", 3, False)
    assert all(len(steps) == 5 for steps in plan.steps)
    cid = plan.correlation_id(7)
    flags = [_flags(plan.request(0, k, cid)) for k in range(5)]
    assert flags == [(cid, True, False), (cid, False, False), (cid, False, False), (cid, False, False), (cid, False, True)]
    assert _flags(plan.request(0, 1, cid, last=True)) == (cid, False, True)  # a sequence cut short still ends


def test_string_correlation_ids_and_direct_slots_follow_the_config():
    config = _config("direct", "TYPE_STRING")
    assert string_corrid(config) and not string_corrid(_config())
    plan = sequence_plan(_Client(config), "acc")
    assert plan.strategy == "direct" and plan.live == 4  # max_batch_size 2 x 2 instances
    cid = plan.correlation_id(9)
    assert isinstance(cid, str) and _flags(plan.request(0, 0, cid)) == (cid, True, False)


def test_declared_streams_are_played_as_sequences():
    from pytest_triton_ready.input_data import parse_input_data

    client = _Client(_config())
    client.declared.data["acc"] = parse_input_data({"data": [[{"VALUE": [1]}, {"VALUE": [2]}, {"VALUE": [3]}],
                                                             [{"VALUE": [5]}]]}, "team.json")
    plan = sequence_plan(client, "acc")
    assert [[int(s["VALUE"].sum()) for s in steps] for steps in plan.steps] == [[1, 2, 3], [5]]
    assert _flags(plan.request(1, 0, 4)) == (4, True, True)  # a one-step stream: START and END together


class _OrderSender:
    """Records each request's (id, start, end) and how many requests of one id are in flight."""

    def __init__(self):
        self.sent = []
        self.in_flight = defaultdict(int)
        self.overlap = 0
        self.live = set()
        self.most_live = 0

    async def send(self, pool, request, counter=0):
        cid, start, end = _flags(request)
        self.sent.append((cid, start, end))
        self.in_flight[cid] += 1
        self.overlap = max(self.overlap, self.in_flight[cid])
        if start:
            self.live.add(cid)
        self.most_live = max(self.most_live, len(self.live))
        await asyncio.sleep(0.001)
        self.in_flight[cid] -= 1
        if end:
            self.live.discard(cid)
        return None

    async def close(self):
        pass

    def by_sequence(self) -> dict:
        """{correlation id: [(start flag, end flag) of each request, in send order]}."""
        steps = defaultdict(list)
        for cid, start, end in self.sent:
            steps[cid].append((start, end))
        return steps


def test_the_load_engine_plays_whole_sequences_within_the_live_limit():
    pool = build_pool(_Client(_config()), "acc", seed=0)
    assert isinstance(pool, RequestPool) and pool.sequences is not None
    sender = _OrderSender()
    plan = TrafficPlan({"acc": pool}, "closed", concurrency={"acc": 5}, window_s=0.2, bin_s=None, duration_s=0.5)
    asyncio.run(Traffic(plan, sender).run())
    by_id = sender.by_sequence()
    assert len(by_id) >= 3 and sender.overlap == 1  # never two requests of one sequence in flight
    assert sender.most_live <= 3  # max_candidate_sequences, though the concurrency is 5
    for steps in by_id.values():
        assert steps[0][0] and not any(start for start, _ in steps[1:])  # START first, only first
        assert all(not end for _, end in steps[:-1])
    assert all(steps[-1][1] for steps in by_id.values())  # every sequence ends, one cut by the stop too
    assert sum(len(steps) != 5 for steps in by_id.values()) <= 3  # only those cut by the stop are short


def test_the_open_loop_ends_every_sequence_its_stop_cut():
    """A sequence left open holds its slot in the sequence batcher until its idle timeout (10 s in
    the demo), and the next requests to the model wait for one: the stop sends each one's END."""
    pool = build_pool(_Client(_config()), "acc", seed=0)
    sender = _OrderSender()
    plan = TrafficPlan({"acc": pool}, "open", rates={"acc": 200.0}, window_s=0.2, bin_s=None, duration_s=0.5)
    asyncio.run(Traffic(plan, sender).run())
    by_id = sender.by_sequence()
    assert len(by_id) >= 3 and sender.most_live <= 3
    assert all(steps[0][0] for steps in by_id.values())
    assert all(steps[-1][1] for steps in by_id.values())  # no sequence is left without its END
    assert any(len(steps) != 5 for steps in by_id.values())  # some were cut by the stop, and ended


def test_the_stateful_check_catches_state_mixed_between_sequences():
    healthy = check_sequences(_Client(_config()), "acc")
    assert healthy.problems == [] and len(healthy.outcomes) == 4
    mixed = check_sequences(_Client(_config(), mixing=True), "acc")
    [problem] = mixed.problems
    assert problem.startswith("state mixed between sequences: step ") and "TOTAL" in problem
