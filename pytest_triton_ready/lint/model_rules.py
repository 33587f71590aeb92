"""The model-config rules, one small function each. Their tables are data at the top of the file.

Each rule states its reason in one sentence and names the offending value; docs/config-rules.md
lists them with their ids.
"""

from __future__ import annotations

from collections.abc import Iterator

from .engine import LintContext, Violation, rule
from .modelconfig import ModelSource, model_config_pb2

GB = 1e9  # decimal gigabytes, as GPU boards are sold (a "24 GB" board reports about 24.1e9 bytes)

# Input names the sequence batcher fills (Triton's CONTROL_SEQUENCE_* conventions); a model that
# reads them keeps state between requests.
SEQUENCE_CONTROL_INPUTS = ("START", "END", "READY", "CORRID")

# Backends whose engines are built for particular batch sizes: a reason to prefer those sizes.
BATCH_PROFILE_PLATFORMS = ("tensorrt_plan", "tensorrt")

# Instances per GPU for a model of a given size on a GPU of a given memory:
# (smallest model GB, largest model GB, smallest GPU GB, fewest instances, most instances).
INSTANCE_COUNT_TABLE = (
    (0.0, 2.0, 24.0, 3, 4),
    (2.0, 8.0, 24.0, 2, 2),
    (8.0, float("inf"), 40.0, 1, 2),
)


def _stateful_reason(source: ModelSource, context: LintContext) -> str | None:
    if source.name in context.stateful_models:
        return "the YAML declares it stateful (lint.stateful_models)"
    controls = [i.name for i in source.config.input if i.name.upper() in SEQUENCE_CONTROL_INPUTS]
    if controls:
        return f"it reads the sequence control input(s) {', '.join(controls)}"
    return None


@rule("dynamic-batching-on-stateful", "error",
      "dynamic_batching on a stateful model: state between requests needs the sequence batcher.")
def dynamic_batching_on_stateful(source: ModelSource, context: LintContext) -> Iterator[Violation]:
    if not source.config.HasField("dynamic_batching"):
        return
    why = _stateful_reason(source, context)
    if why:
        yield Violation("dynamic_batching", f"the model is stateful ({why}), and the dynamic batcher mixes requests "
                                            "of different sequences across instances: use sequence_batching")


@rule("dynamic-batching-without-max-batch-size", "error",
      "dynamic_batching with max_batch_size 0: the model cannot take a batch, so the batcher has nothing to form.")
def dynamic_batching_without_max_batch_size(source: ModelSource, context: LintContext) -> Iterator[Violation]:
    if source.config.HasField("dynamic_batching") and source.config.max_batch_size <= 0:
        yield Violation(f"max_batch_size: {source.config.max_batch_size}",
                        "dynamic_batching needs max_batch_size > 0, since a model without a batch dimension "
                        "cannot receive the batches the scheduler would form")


@rule("preferred-batch-size-above-max", "error",
      "a preferred_batch_size larger than max_batch_size can never be formed.")
def preferred_batch_size_above_max(source: ModelSource, context: LintContext) -> Iterator[Violation]:
    config = source.config
    too_big = [size for size in config.dynamic_batching.preferred_batch_size if size > config.max_batch_size]
    if config.HasField("dynamic_batching") and too_big:
        yield Violation(f"preferred_batch_size {too_big} > max_batch_size {config.max_batch_size}",
                        "a preferred batch size above max_batch_size can never be formed, so the scheduler "
                        "waits for it in vain")


@rule("preferred-batch-size-without-reason", "warning",
      "preferred_batch_size on a model with no batch-size-specific engine: let the scheduler choose.")
def preferred_batch_size_without_reason(source: ModelSource, context: LintContext) -> Iterator[Violation]:
    config = source.config
    sizes = list(config.dynamic_batching.preferred_batch_size)
    if not sizes or sizes == [config.max_batch_size] or source.name in context.preferred_batch_size_models:
        return  # [max_batch_size] is what Triton fills in itself, and what the scheduler aims for anyway
    if config.platform in BATCH_PROFILE_PLATFORMS or config.backend in BATCH_PROFILE_PLATFORMS:
        return
    yield Violation(f"preferred_batch_size {sizes}",
                    f"a {config.backend or config.platform or 'model'} model has no engine built for particular "
                    "batch sizes, so preferring some only delays batches: let the scheduler form the largest it can "
                    "(or list the model under lint.preferred_batch_size_models if measurements justify it)")


@rule("queue-delay-over-latency-budget", "error",
      "max_queue_delay_microseconds above a share (80%) of the model's p99 latency budget.")
def queue_delay_over_latency_budget(source: ModelSource, context: LintContext) -> Iterator[Violation]:
    budget_ms = context.slo_p99_ms.get(source.name)
    if not source.config.HasField("dynamic_batching") or budget_ms is None:
        return
    delay_ms = source.config.dynamic_batching.max_queue_delay_microseconds / 1000.0
    allowed_ms = context.queue_delay_budget_fraction * budget_ms
    if delay_ms > allowed_ms:
        yield Violation(f"max_queue_delay_microseconds: {source.config.dynamic_batching.max_queue_delay_microseconds}",
                        f"a queue delay of {delay_ms:g} ms exceeds {context.queue_delay_budget_fraction:.0%} of the "
                        f"{budget_ms:g} ms p99 budget, leaving too little of it for the model to compute")


@rule("queue-delay-zero-with-throughput-goal", "warning",
      "max_queue_delay_microseconds 0 on a batched model that has a throughput goal.")
def queue_delay_zero_with_throughput_goal(source: ModelSource, context: LintContext) -> Iterator[Violation]:
    config = source.config
    goal = context.min_throughput.get(source.name)
    if goal and config.HasField("dynamic_batching") and config.max_batch_size > 0 \
            and config.dynamic_batching.max_queue_delay_microseconds == 0:
        yield Violation("max_queue_delay_microseconds: 0",
                        f"with no queue delay the batcher only batches requests that already wait, so under light "
                        f"load batches stay small; a goal of {goal:g} infer/s usually needs a delay of 100-1000 us")


def _decoupled(config) -> bool:
    return config.HasField("model_transaction_policy") and config.model_transaction_policy.decoupled


@rule("response-cache-on-sequence-or-decoupled", "error",
      "response_cache on a sequence (stateful) or decoupled model, whose answers depend on more than the request.")
def response_cache_on_sequence_or_decoupled(source: ModelSource, context: LintContext) -> Iterator[Violation]:
    config = source.config
    if not config.response_cache.enable:
        return
    if config.HasField("sequence_batching"):
        yield Violation("response_cache { enable: true } with sequence_batching",
                        "a sequence model answers from its state, so a cached answer to an equal request is wrong")
    elif _decoupled(config):
        yield Violation("response_cache { enable: true } with model_transaction_policy { decoupled: true }",
                        "a decoupled model sends any number of responses per request, which the cache cannot replay")
    elif _stateful_reason(source, context):
        yield Violation("response_cache { enable: true }",
                        f"the model is stateful ({_stateful_reason(source, context)}), so a cached answer is wrong")


@rule("response-cache-on-nondeterministic", "error",
      "response_cache on a model the YAML declares non-deterministic (lint.nondeterministic_models).")
def response_cache_on_nondeterministic(source: ModelSource, context: LintContext) -> Iterator[Violation]:
    if source.config.response_cache.enable and source.name in context.nondeterministic_models:
        yield Violation("response_cache { enable: true }",
                        "the YAML declares the model non-deterministic (lint.nondeterministic_models), so the cache "
                        "would freeze one of its answers for every equal request")


def gpu_instances_per_gpu(config, gpu_indices: list[int]) -> dict[int, int]:
    """How many instances of the model each GPU carries: KIND_GPU groups, and on a host with GPUs
    KIND_AUTO groups or no instance_group at all (Triton then puts one instance on each GPU)."""
    kinds = model_config_pb2().ModelInstanceGroup.Kind
    if not config.instance_group:
        return {index: 1 for index in gpu_indices}
    counts: dict[int, int] = {}
    for group in config.instance_group:
        on_gpu = group.kind == kinds.Value("KIND_GPU") or (group.kind == kinds.Value("KIND_AUTO") and gpu_indices)
        if not on_gpu:
            continue
        for index in (list(group.gpus) or gpu_indices):
            counts[index] = counts.get(index, 0) + (group.count or 1)
    return counts


def has_gpu_instances(config, gpu_indices: list[int] = ()) -> bool:
    """Whether the model runs instances on a GPU (KIND_AUTO counts only when GPUs are known)."""
    return bool(gpu_instances_per_gpu(config, list(gpu_indices))) or any(
        group.kind == model_config_pb2().ModelInstanceGroup.Kind.Value("KIND_GPU") for group in config.instance_group)


@rule("gpu-instance-on-missing-gpu", "error",
      "a KIND_GPU instance group names a GPU id the server's host does not have.")
def gpu_instance_on_missing_gpu(source: ModelSource, context: LintContext) -> Iterator[Violation]:
    kinds = model_config_pb2().ModelInstanceGroup.Kind
    named = sorted({i for g in source.config.instance_group if g.kind == kinds.Value("KIND_GPU") for i in g.gpus})
    if not named:
        return
    if context.gpus is None:
        yield Violation(f"gpus {named}", f"not checked: {context.gpus_unknown_reason}", "info")
        return
    present = {reading.index for reading in context.gpus}
    missing = [i for i in named if i not in present]
    if missing:
        yield Violation(f"gpus {missing}",
                        f"GPU id(s) {missing} do not exist (the host has {len(present)} GPU(s): "
                        f"{sorted(present) or 'none'}), so Triton fails to load the model")


def recommended_instances(model_gb: float, gpu_gb: float) -> tuple[int, int] | None:
    """(fewest, most) instances per GPU from INSTANCE_COUNT_TABLE, or None when no row applies."""
    for low, high, gpu_min, fewest, most in INSTANCE_COUNT_TABLE:
        if low <= model_gb < high and gpu_gb >= gpu_min:
            return fewest, most
    return None


@rule("instance-count-for-model-size", "warning",
      "GPU instance count against the model's measured memory and the GPU's size (3-4 / 2 / 1-2 instances).")
def instance_count_for_model_size(source: ModelSource, context: LintContext) -> Iterator[Violation]:
    if not has_gpu_instances(source.config, [g.index for g in context.gpus or []]):
        return
    if context.gpus is None:
        yield Violation("instance_group", f"not checked: {context.gpus_unknown_reason}", "info")
        return
    memory = context.model_memory_bytes.get(source.name)
    if memory is None:
        why = context.model_memory_unmeasured.get(source.name, "its GPU memory was not measured")
        yield Violation("instance_group", f"not checked: {why}", "info")
        return
    counts = gpu_instances_per_gpu(source.config, [g.index for g in context.gpus])
    for gpu in context.gpus:
        instances = counts.get(gpu.index, 0)
        used = memory.get(gpu.uuid)
        if not instances or used is None or not gpu.memory_total_bytes:
            continue
        model_gb, gpu_gb = used / instances / GB, gpu.memory_total_bytes / GB
        advice = recommended_instances(model_gb, gpu_gb)
        if advice and not advice[0] <= instances <= advice[1]:
            wanted = f"{advice[0]}-{advice[1]}" if advice[0] != advice[1] else str(advice[0])
            yield Violation(f"{instances} instance(s) on GPU {gpu.index}, {model_gb:.2f} GB each, GPU {gpu_gb:.0f} GB",
                            f"a {model_gb:.2f} GB model on a {gpu_gb:.0f} GB GPU is best served by {wanted} "
                            f"instance(s) per GPU, not {instances}")


DEFAULT_LATEST_VERSIONS = 1


def is_default_version_policy(source: ModelSource) -> bool:
    """True when the policy is Triton's default (latest 1), whether written or left out."""
    if source.wrote("version_policy") is False:
        return True
    policy = source.config.version_policy
    return policy.WhichOneof("policy_choice") in (None, "latest") and \
        policy.latest.num_versions in (0, DEFAULT_LATEST_VERSIONS)


@rule("default-version-policy-under-rollout", "error",
      "the default version_policy (latest 1) where the YAML declares a canary or blue-green rollout.")
def default_version_policy_under_rollout(source: ModelSource, context: LintContext) -> Iterator[Violation]:
    rollout = context.rollouts.get(source.name)
    if rollout and is_default_version_policy(source):
        shown = "version_policy left out" if source.wrote("version_policy") is False else "latest { num_versions: 1 }"
        yield Violation(shown, f"a {rollout} rollout needs two versions served at once, and the default policy serves "
                               "only the newest: set version_policy to specific { versions: [...] } or latest { num_versions: 2 }")
