"""Stateful models answered as their clients use them: whole sequences (START, middle steps, END
on one correlation id), and the check that one sequence's answers do not change when another
sequence's requests are interleaved with it (a model that keeps state per instance, not per
correlation id, mixes them)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass
class SequenceAnswers:
    """What a sequence model answered: the outcome of each step of the sequence played alone,
    and the problems found (failed steps, answers changed by interleaving)."""

    model: str
    steps: int
    outcomes: list[Any] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    @property
    def last(self) -> Any:
        return self.outcomes[-1] if self.outcomes else None


def play(client: Any, model: str, steps: tuple, correlation_id: int | str) -> list[Any]:
    """Send each step in order on `correlation_id`, START on the first and END on the last; stops
    at the first failed step."""
    outcomes = []
    for k, inputs in enumerate(steps):
        outcome = client.infer(model, dict(inputs), sequence_id=correlation_id, sequence_start=k == 0,
                               sequence_end=k == len(steps) - 1)
        outcomes.append(outcome)
        if not outcome.ok:
            break
    return outcomes


def check_sequences(client: Any, model: str, *, length: int = 4) -> SequenceAnswers:
    """Play sequence A alone, then A again interleaved step by step with sequence B (both on fresh
    ids); A's answers must be the same both times."""
    from .load.requests import sequence_plan

    rng = np.random.default_rng()
    plan = sequence_plan(client, model, size=2, rng=rng)
    first, second = plan.steps[0], plan.steps[1 % len(plan.steps)]
    declared = getattr(client, "declared", None)
    if declared is None or model not in declared.data:
        first, second = first[:length], second[:length]  # a short synthesized sequence is enough here
    answers = SequenceAnswers(model, len(first))
    ids = [plan.correlation_id(int(rng.integers(1, 1 << 20))) for _ in range(3)]
    answers.outcomes = play(client, model, first, ids[0])
    failed = [(k, o) for k, o in enumerate(answers.outcomes) if not o.ok]
    if failed:
        k, outcome = failed[0]
        answers.problems.append(f"step {k + 1} of {len(first)} of sequence {ids[0]!r} failed: {outcome.error}")
        return answers
    again: list[Any] = []
    for k in range(max(len(first), len(second))):
        if k < len(first):
            again.append(client.infer(model, dict(first[k]), sequence_id=ids[1], sequence_start=k == 0,
                                      sequence_end=k == len(first) - 1))
        if k < len(second):
            client.infer(model, dict(second[k]), sequence_id=ids[2], sequence_start=k == 0,
                         sequence_end=k == len(second) - 1)
    for k, (alone, mixed) in enumerate(zip(answers.outcomes, again, strict=False)):
        if not mixed.ok:
            answers.problems.append(f"step {k + 1} of sequence {ids[1]!r}, interleaved with sequence {ids[2]!r}, "
                                    f"failed: {mixed.error}")
            break
        changed = [n for n in alone.outputs if not np.array_equal(alone.outputs[n], mixed.outputs.get(n))]
        if changed:
            name = changed[0]
            answers.problems.append(
                f"state mixed between sequences: step {k + 1} answered {name} = {_show(mixed.outputs.get(name))} "
                f"when interleaved with another sequence, {_show(alone.outputs[name])} alone (state kept per "
                "instance instead of per correlation id, or the wrong scheduler)")
            break
    return answers


def _show(array: Any) -> str:
    if array is None:
        return "nothing"
    flat = np.asarray(array).reshape(-1)
    return str(flat[:6].tolist()) + (" ..." if flat.size > 6 else "")
