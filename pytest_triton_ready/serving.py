"""CFG-1 "every model serves": READY in the repository index and on its ready endpoint, and a real
inference answered with the outputs it declares (checks/test_config.py).

`model_state_problems` reads the repository index alone (no server call) so that every way a model
can fail to be READY is decided, and unit-tested, in one place; `judge_models_ready` records what it
found and asks each READY model's ready endpoint. `judge_answers` sends each model a real inference
(a whole sequence for a sequence model), then its declared expectations, then the same input again.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from .expectations import Expectation, answer_mismatches, expectation_for
from .input_data import InputDataError
from .inputs import output_mismatches, synthesize_inputs
from .sequences import check_sequences
from .server.pipelines import composing_models, failures_between, step_failures

if TYPE_CHECKING:
    from .record.recorder import CheckRecorder
    from .server.under_test import ServerUnderTest

UNPARSED = ("its config.pbtxt failed to parse or validate (the server lists it without a state; its log names "
            "the error)")


@dataclass(frozen=True)
class ModelState:
    """One repository-index entry as CFG-1 reads it: the state to record and, where the model or
    version is not READY, why."""

    model: str
    label: str  # "M" or "M/version": where the state is recorded
    state: str
    problem: str | None = None  # the finding
    reason: str | None = None  # the load failure, kept as evidence


def index_by_model(index: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """The repository index grouped by model name (one entry per version the server lists)."""
    grouped: dict[str, list[dict[str, Any]]] = {}
    for entry in index:
        grouped.setdefault(entry["name"], []).append(entry)
    return grouped


def model_states(model: str, entries: list[dict[str, Any]], never_loaded: dict[str, str]) -> list[ModelState]:
    """The state of each of a model's index entries. An entry without a state is a model listed by
    name only: its config never parsed or validated (the launcher's reason where it read one from
    the log). A state other than READY is a problem with the server's reason."""
    states = []
    for entry in entries:
        if entry.get("state") is None:
            reason = never_loaded.get(model) or UNPARSED
            states.append(ModelState(model, model, "NOT LOADED", f"{model} was never loaded: {reason}", reason))
            continue
        state, version = entry["state"], entry.get("version") or "?"
        problem = reason = None
        if state != "READY":
            reason = entry.get("reason") or "the server gave no reason"
            problem = f"{model} version {version} is {state}: {reason}"
        states.append(ModelState(model, f"{model}/{version}", state, problem, reason))
    return states


def judge_models_ready(check: CheckRecorder, target: ServerUnderTest) -> None:
    """Every model in scope is in the repository index, every listed version READY, and a READY
    model's /v2/models/M/ready answers 200; each problem is an error finding with the server's reason."""
    index = index_by_model(target.client.repository_index())
    models = target.models()
    mark = check.mark()
    if not models:
        check.finding("the repository index lists no model at all")
    never_loaded = target.launcher.failed_models  # a launched server's reasons, from its log too
    for model in models:
        if model not in index:
            check.finding(f"{model}: not in the repository index", model=model)
            continue
        states = model_states(model, index[model], never_loaded)
        for state in states:
            check.measure("state", state.state, model=state.label)
            if state.problem:
                check.finding(state.problem, model=model, rule="CFG-1")
                check.evidence(f"{model} load failure", state.reason)
        if any(s.state == "READY" for s in states) and not target.client.model_ready(model):
            check.finding(f"{model}: READY in the index but /v2/models/{model}/ready does not answer 200", model=model)
    check.judged_since(mark, "model-ready", measured=f"the repository index and ready endpoints of {len(models)} models")
    if check.errors:
        check.recommend("Read each reason above: fix the config.pbtxt or model files it names, then load the model again.")


def same_outputs(first: dict[str, Any], second: dict[str, Any]) -> bool:
    """Whether a second answer carries every output of the first with equal values."""
    return all(np.array_equal(first[name], second.get(name)) for name in first)


class _Answers:
    """CFG-1's inference rules for one model on one client."""

    def __init__(self, check: CheckRecorder, target: ServerUnderTest, served: dict[str, str]) -> None:
        self.check, self.target, self.client, self.served = check, target, target.client, served

    def judge(self, model: str) -> None:
        check, client = self.check, self.client
        mark = check.mark()
        metadata, config = client.model_metadata(model), client.model_config(model)
        sequence = client.is_sequence_model(model)
        outcome = self._first_answer(model, sequence)
        if outcome is None:
            return
        if not outcome.ok:
            if not sequence:  # a failed step is already named
                hint = f" {client.refusal_hint(model)}" if outcome.refused else ""  # a timeout is no refusal
                check.finding(f"{model}: inference failed: {outcome.error}{hint}; sent to {self.served[model]}",
                              model=model)
            check.evidence(f"{model} error", outcome.error or "")
            return
        for problem in output_mismatches(metadata, config, outcome.outputs):
            check.finding(f"{model}: {problem}", model=model, rule="output-contract")
        expectation = expectation_for(model, self.target.settings.expectations, client.declared.data.get(model))
        self._declared_answers(model, metadata, config, expectation)
        check.judged_since(mark, "answer-matches-declared-outputs", measured="the answer to a real inference",
                           model=model)
        if not sequence:
            again = client.infer(model, outcome.inputs)
            if again.ok and not same_outputs(outcome.outputs, again.outputs):
                check.finding(f"{model}: the same input gave different outputs on two requests",
                              severity="error" if expectation.deterministic else "warning", model=model,
                              rule="determinism")

    def _first_answer(self, model: str, sequence: bool):
        """The model's first answer (a sequence's last step), with its latency and the failures of
        its composing steps meanwhile; None where its declared input data cannot be used."""
        check, client = self.check, self.client
        steps = composing_models(model, client.model_config, self.target.settings.bls_composing)
        before = step_failures(client, steps)
        try:
            if sequence:  # a whole sequence, then the same one interleaved with another
                answers = check_sequences(client, model)
                for problem in answers.problems:
                    check.finding(f"{model}: {problem}", model=model, rule="sequence-state")
                check.measure("sequence steps answered", sum(o.ok for o in answers.outcomes), "requests", model=model,
                              threshold=answers.steps, comparison=">=")
                outcome = answers.last
            else:
                outcome = client.infer(model)
        except InputDataError as exc:
            check.finding(f"{model}: {exc}", model=model, rule="input-data")
            return None
        check.measure("inference latency", round(outcome.latency_s * 1000, 3), "ms", model=model)
        for step, failed in failures_between(before, step_failures(client, steps)).items():
            swallowed = ", yet the model answered without an error: the error is swallowed" if outcome.ok else ""
            check.finding(f"{model}: its composing model {step} failed {failed} request(s) during {model}'s "
                          f"inference{swallowed}; sent to {self.served[model]}", model=model,
                          rule="pipeline-step-failed")
        return outcome

    def _declared_answers(self, model: str, metadata: dict, config: dict, expectation: Expectation) -> None:
        """Each declared case's inputs get the declared answer."""
        check, client = self.check, self.client
        batched = int(config.get("max_batch_size", 0)) > 0
        for case in expectation.cases:
            try:
                inputs = synthesize_inputs(metadata, config, dynamic_dim=client.dynamic_dim,
                                           shapes=client.input_shapes.get(model, {}), steps=[case.inputs])
            except InputDataError as exc:
                check.finding(f"{model}: {exc}", model=model, rule="input-data")
                continue
            answer = client.infer(model, inputs)
            problems = ([f"{case.where}: the request failed: {answer.error}"] if not answer.ok else
                        answer_mismatches(case, answer.outputs, metadata.get("outputs", []), batched))
            for problem in problems:
                check.finding(f"{model}: {problem}", model=model, rule="answer")


def judge_answers(check: CheckRecorder, target: ServerUnderTest, models: list[str], served: dict[str, str]) -> None:
    """Every model in `models` answers a real inference with its declared outputs, its declared
    expectations, and (stateless) the same output for the same input."""
    answers = _Answers(check, target, served)
    for model in models:
        answers.judge(model)
