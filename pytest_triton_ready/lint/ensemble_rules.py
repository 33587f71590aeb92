"""The ensemble rules: an ensemble's `ensemble_scheduling` against the models its steps call.

Triton checks an ensemble only when it loads it, and names one problem at a time; these rules read
every step at once: the step's model exists in the repository, each input_map / output_map names a
tensor the step model declares and a tensor the ensemble has (its inputs, or another step's
outputs), the datatypes on both ends agree, and every step model takes the ensemble's batch size.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from .engine import LintContext, Violation, rule
from .modelconfig import ModelSource, model_config_pb2


def _dtype(value: int) -> str:
    return model_config_pb2().DataType.Name(value)


def _step_config(context: LintContext, name: str) -> tuple[bool, Any]:
    """(exists, config or None) for a step's model from what the run knows of the repository."""
    if context.repository is None:
        return True, None  # nothing known beyond the ensemble: existence is not judged
    if name not in context.repository:
        return False, None
    source = context.repository[name]
    return True, source.config if source is not None else None


@rule("ensemble-steps", "error",
      "an ensemble step calls a model that is not in the repository, or maps a tensor its model or the "
      "ensemble does not have, with a different datatype, or a smaller max_batch_size than the ensemble's.")
def ensemble_step_rule(source: ModelSource, context: LintContext) -> Iterator[Violation]:
    config = source.config
    if config.platform != "ensemble" and not config.HasField("ensemble_scheduling"):
        return
    steps = list(config.ensemble_scheduling.step)
    if not steps:
        yield Violation("ensemble_scheduling", "the ensemble has no step: it cannot compute its outputs")
        return
    # ensemble tensor name -> datatype (None where the producing step's config is unknown)
    tensors: dict[str, str | None] = {t.name: _dtype(t.data_type) for t in config.input}
    producing: dict[int, Any] = {}
    for number, step in enumerate(steps, start=1):
        exists, step_config = _step_config(context, step.model_name)
        if not exists:
            yield Violation(f"step {number}: model_name {step.model_name!r}",
                            f"step {number} calls {step.model_name}, which is not in {context.repository_where}: "
                            "the ensemble cannot load")
            tensors.update(dict.fromkeys(step.output_map.values()))  # its outputs: named, datatype unknown
            continue
        producing[number] = step_config
        outputs = {o.name: _dtype(o.data_type) for o in step_config.output} if step_config is not None else {}
        for model_tensor, ensemble_tensor in step.output_map.items():
            if step_config is not None and model_tensor not in outputs:
                yield Violation(f"step {number} output_map {model_tensor!r}",
                                f"step {number} maps output {model_tensor} of {step.model_name}, which declares "
                                f"no such output (it has {', '.join(sorted(outputs)) or 'none'})")
                continue
            tensors[ensemble_tensor] = outputs.get(model_tensor)
    for number, step in enumerate(steps, start=1):
        if number not in producing:
            continue
        step_config = producing[number]
        inputs = {i.name: _dtype(i.data_type) for i in step_config.input} if step_config is not None else {}
        for model_tensor, ensemble_tensor in step.input_map.items():
            if step_config is not None and model_tensor not in inputs:
                yield Violation(f"step {number} input_map {model_tensor!r}",
                                f"step {number} feeds input {model_tensor} of {step.model_name}, which declares "
                                f"no such input (it has {', '.join(sorted(inputs)) or 'none'})")
                continue
            if ensemble_tensor not in tensors:
                yield Violation(f"step {number} input_map {model_tensor!r}: {ensemble_tensor!r}",
                                f"step {number} reads tensor {ensemble_tensor}, which is neither an input of the "
                                "ensemble nor an output of any step")
                continue
            want, have = inputs.get(model_tensor), tensors[ensemble_tensor]
            if want and have and want != have:
                yield Violation(f"step {number} input {model_tensor}: {have} -> {want}",
                                f"step {number} feeds {ensemble_tensor} ({have}) to input {model_tensor} of "
                                f"{step.model_name}, which takes {want}")
        if step_config is not None and config.max_batch_size > 0 and step_config.max_batch_size < config.max_batch_size:
            yield Violation(f"step {number} {step.model_name} max_batch_size {step_config.max_batch_size} < "
                            f"{config.max_batch_size}",
                            f"the ensemble takes batches of up to {config.max_batch_size} but step {number}'s "
                            f"model {step.model_name} takes at most {step_config.max_batch_size}: a full batch "
                            "fails at that step")
    for output in config.output:
        if output.name not in tensors:
            yield Violation(f"output {output.name}", f"no step produces the ensemble's output {output.name}")
        elif tensors[output.name] and tensors[output.name] != _dtype(output.data_type):
            yield Violation(f"output {output.name}: {tensors[output.name]} -> {_dtype(output.data_type)}",
                            f"the ensemble declares output {output.name} as {_dtype(output.data_type)} but the "
                            f"step producing it gives {tensors[output.name]}")
