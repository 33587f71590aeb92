"""Probes that tell the truth about a server: every instance answers real requests (not only the
ready endpoints), readiness watched over time, and waiting until a condition holds.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..load.errors import UNHEALTHY_STUB


@dataclass
class InstanceProbe:
    """One round of real requests spread over a model's instances."""

    model: str
    sent: int
    ok: int
    errors: dict[str, int] = field(default_factory=dict)
    unhealthy_instances: list[str] = field(default_factory=list)
    wrong_answers: int = 0

    @property
    def every_instance_answers(self) -> bool:
        return self.sent > 0 and self.ok == self.sent

    def describe(self) -> str:
        text = f"{self.ok} of {self.sent} probe requests answered correctly"
        if self.unhealthy_instances:
            text += f"; unhealthy instances: {', '.join(self.unhealthy_instances)}"
        if self.errors:
            text += "; errors: " + "; ".join(f"{n} x {r}" for r, n in self.errors.items())
        return text


class InstanceProber:
    """Real requests spread over a model's instances: `2 x instances` concurrent senders for at
    least `span_s` seconds (and `rounds` requests each), so that every instance is handed work.

    Why a span and not one burst: Triton gives each batch to a free instance, and the python
    backend takes about a second to fail a request routed to a dead stub, during which that
    instance takes nothing else. A burst shorter than that can be served entirely by the healthy
    instances and miss the dead one; a span longer than it cannot.

    Answers are compared with a reference answer to the same input taken while the model was
    healthy, when one was taken. Requests go over gRPC through one client (gRPC channels are
    thread-safe; idle HTTP keep-alive connections would hold a server that shuts down)."""

    def __init__(self, client_factory: Callable[[], Any], model: str, instances: int, span_s: float = 1.5,
                 rounds: int = 2) -> None:
        self.model = model
        self.instances = instances
        self.span_s = span_s
        self.rounds = rounds
        self.client = client_factory()
        self.client.model_config(model)  # cached now: worker threads only send inferences
        self.client.model_metadata(model)
        _ = self.client.grpc  # the channel, created once before threads share it
        self.reference: tuple[dict[str, np.ndarray], dict[str, np.ndarray]] | None = None

    def take_reference(self) -> bool:
        """Remember one healthy answer (input and output) to compare probe answers with."""
        outcome = self.client.infer(self.model, protocol="grpc")
        if outcome.ok:
            self.reference = (outcome.inputs, outcome.outputs)
        return outcome.ok

    def answers(self, client: Any = None, protocol: str | None = "grpc") -> bool:
        """One request answered through `client` (default the prober's own; `protocol` None: the
        client's default), with the reference output for the reference input once one was taken."""
        return self._one(0, client, protocol)[0]

    def _one(self, _: int, client: Any = None, protocol: str | None = "grpc") -> tuple[bool, str | None]:
        inputs = self.reference[0] if self.reference else None
        options = {"protocol": protocol} if protocol else {}
        outcome = (client or self.client).infer(self.model, inputs, **options)
        if not outcome.ok:
            return False, outcome.error or "unknown error"
        if self.reference and not all(np.array_equal(v, outcome.outputs.get(k)) for k, v in self.reference[1].items()):
            return False, "wrong answer: output differs from the healthy reference for the same input"
        return True, None

    def probe(self, span_s: float | None = None) -> InstanceProbe:
        concurrency = 2 * self.instances
        deadline = time.monotonic() + (self.span_s if span_s is None else span_s)

        def sender(_: int) -> list[tuple[bool, str | None]]:
            answers: list[tuple[bool, str | None]] = []
            while len(answers) < self.rounds or time.monotonic() < deadline:
                answers.append(self._one(len(answers)))
            return answers

        with ThreadPoolExecutor(concurrency, thread_name_prefix="instance-probe") as pool:
            answers = [a for batch in pool.map(sender, range(concurrency)) for a in batch]
        result = InstanceProbe(self.model, len(answers), 0)
        for ok, error in answers:
            if ok:
                result.ok += 1
                continue
            result.errors[error] = result.errors.get(error, 0) + 1
            if error.startswith("wrong answer"):
                result.wrong_answers += 1
            match = UNHEALTHY_STUB.search(error)
            if match and match.group("instance") not in result.unhealthy_instances:
                result.unhealthy_instances.append(match.group("instance"))
        return result

    def close(self) -> None:
        self.client.close()


def wait_until(condition: Callable[[], bool], timeout_s: float, interval_s: float = 0.05) -> float | None:
    """Seconds until `condition()` first held, or None if it did not within `timeout_s`.
    An exception from `condition` counts as not yet."""
    started = time.monotonic()
    while True:
        try:
            if condition():
                return time.monotonic() - started
        except Exception:
            pass
        if time.monotonic() - started >= timeout_s:
            return None
        time.sleep(interval_s)


class Watcher:
    """Polls named conditions in a background thread (every `interval_s`) and remembers when each
    first held, as seconds since `start()`: 'live', 'ready', 'first correct inference'."""

    def __init__(self, conditions: dict[str, Callable[[], bool]], interval_s: float = 0.05,
                 on_first: Callable[[str], Any] | None = None) -> None:
        self.conditions = dict(conditions)
        self.interval_s = interval_s
        self.on_first = on_first
        self.first: dict[str, float] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.started = 0.0

    def start(self) -> Watcher:
        self.started = time.monotonic()
        self._thread = threading.Thread(target=self._run, name="fault-watcher", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set() and len(self.first) < len(self.conditions):
            for name, condition in self.conditions.items():
                if name in self.first:
                    continue
                try:
                    held = condition()
                except Exception:
                    held = False
                if held:
                    self.first[name] = time.monotonic() - self.started
                    if self.on_first is not None:
                        self.on_first(name)
            self._stop.wait(self.interval_s)

    def wait(self, timeout_s: float) -> bool:
        """Wait until every condition held once; False on timeout."""
        deadline = time.monotonic() + timeout_s
        while len(self.first) < len(self.conditions) and time.monotonic() < deadline:
            time.sleep(0.02)
        return len(self.first) == len(self.conditions)

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)
