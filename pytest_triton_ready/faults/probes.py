"""Probes that tell the truth about a server: every instance answers real requests (not only the
ready endpoints), readiness watched over time, and waiting until a condition holds.
"""

from __future__ import annotations

import re
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

_UNHEALTHY_STUB = re.compile(r"Stub process '(?P<instance>[^']+)' is not healthy")


def instance_count(config: dict[str, Any]) -> int:
    """Instances the effective config asks for: each group's count, times its GPUs for KIND_GPU."""
    total = 0
    for group in config.get("instance_group") or [{"count": 1}]:
        count = int(group.get("count", 1))
        gpus = group.get("gpus") or []
        total += count * (len(gpus) if group.get("kind") == "KIND_GPU" and gpus else 1)
    return max(1, total)


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
    """Sends `rounds` waves of concurrent requests, `concurrency` = 2 per instance, so that the
    scheduler has to use every instance (Triton hands work to instances in turn; a wave that all
    instances share cannot miss a dead one). Answers are compared with a reference answer to the
    same input taken while the model was healthy, when one is given."""

    def __init__(self, client_factory: Callable[[], Any], model: str, instances: int, rounds: int = 4) -> None:
        self.client_factory = client_factory
        self.model = model
        self.instances = instances
        self.rounds = rounds
        self._local = threading.local()
        self.reference: tuple[dict[str, np.ndarray], dict[str, np.ndarray]] | None = None

    def _client(self):
        client = getattr(self._local, "client", None)
        if client is None:
            client = self._local.client = self.client_factory()
        return client

    def take_reference(self) -> bool:
        """Remember one healthy answer (input and output) to compare probe answers with."""
        outcome = self._client().infer(self.model)
        if outcome.ok:
            self.reference = (outcome.inputs, outcome.outputs)
        return outcome.ok

    def _one(self, _: int) -> tuple[bool, str | None]:
        client = self._client()
        inputs = self.reference[0] if self.reference else None
        outcome = client.infer(self.model, inputs)
        if not outcome.ok:
            return False, outcome.error or "unknown error"
        if self.reference and not all(np.array_equal(v, outcome.outputs.get(k)) for k, v in self.reference[1].items()):
            return False, "wrong answer: output differs from the healthy reference for the same input"
        return True, None

    def probe(self) -> InstanceProbe:
        concurrency = 2 * self.instances
        sent = concurrency * self.rounds
        result = InstanceProbe(self.model, sent, 0)
        with ThreadPoolExecutor(concurrency, thread_name_prefix="instance-probe") as pool:
            for ok, error in pool.map(self._one, range(sent)):
                if ok:
                    result.ok += 1
                    continue
                result.errors[error] = result.errors.get(error, 0) + 1
                if error.startswith("wrong answer"):
                    result.wrong_answers += 1
                match = _UNHEALTHY_STUB.search(error)
                if match and match.group("instance") not in result.unhealthy_instances:
                    result.unhealthy_instances.append(match.group("instance"))
        return result

    def close(self) -> None:
        client = getattr(self._local, "client", None)
        if client is not None:
            client.close()


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
