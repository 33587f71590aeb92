"""What CFG-2 concludes from a batched model's behaviour at saturation: whether its batches are
far from its preferred sizes, and which batching parameter to move which way.

- Small batches: below max(2, max_batch_size / 2) requests on average.
- Queue share above `queue_max` with small batches: the queue waits without filling batches ->
  lower max_queue_delay_microseconds or add instances.
- Queue share above `queue_max` with full batches: the model is the bottleneck -> add instances
  or raise max_batch_size.
- Small batches without a long queue: requests do not wait long enough to batch -> raise
  max_queue_delay_microseconds or set preferred_batch_size.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def small_batches(batch: float, max_batch_size: int) -> bool:
    """Batches under max(2, max_batch_size / 2) requests: the batcher is not filling them."""
    return batch < max(2.0, 0.5 * max_batch_size)


def far_from_preferred(batch: float, preferred: Sequence[int], fraction: float) -> bool:
    """The average batch is under `fraction` of the smallest preferred size (False without any)."""
    return bool(preferred) and batch < fraction * min(preferred)


def batching_advice(prof: Any, batch: float, share: float | None, queue_max: float) -> tuple[str, str] | None:
    """(what is wrong, which parameter to move which way) for a model profile (ModelProfile) whose
    average batch is `batch` and whose queue share of server latency is `share`; None when fine."""
    small = small_batches(batch, prof.max_batch_size)
    delay = prof.max_queue_delay_us
    if share is not None and share > queue_max:
        if small:
            return (f"requests spend {share:.0%} of server latency queued while batches stay small ({batch:.1f})",
                    f"lower max_queue_delay_microseconds (now {delay}) or add instances: the queue waits without "
                    "filling batches")
        return (f"requests spend {share:.0%} of server latency queued with full batches ({batch:.1f} of "
                f"{prof.max_batch_size})", f"add instances (instance_group count, now {prof.instances}) or raise "
                f"max_batch_size (now {prof.max_batch_size}): the model is the bottleneck, not the batcher")
    if small:
        return (f"batches stay small ({batch:.1f} of max {prof.max_batch_size}) under saturation",
                f"raise max_queue_delay_microseconds (now {delay}) so requests wait long enough to batch, "
                "or set preferred_batch_size")
    return None
