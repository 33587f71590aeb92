"""The LLM backends' request conventions, so that their models get valid requests.

vLLM backend (decoupled): `text_input` (BYTES), and optional `stream` (BOOL),
`sampling_parameters` (BYTES, a JSON object of vLLM SamplingParams), `exclude_input_in_output`
(BOOL; False while streaming is refused), `return_*` (BOOL). TensorRT-LLM (its ensemble and BLS
models): `text_input` (BYTES), `max_tokens` (INT32, at least 1), and optional `stream` (BOOL; True
is refused unless the model is decoupled), `end_id`, `top_k`, `temperature` ... (left out: the
backend's defaults). Text comes from the shipped prompts (prompts.py).
"""

from __future__ import annotations

import json
import re

import numpy as np

TEXT_INPUT_NAMES = re.compile(r"prompt|text_input|text|input_text|query", re.I)
TOKEN_BUDGET_NAMES = re.compile(r"max_tokens|max_new_tokens|request_output_len|max_output_len", re.I)
DEFAULT_BUDGET = 16

# name -> (datatype, sent even where the config marks it optional); the value is set below
CONVENTIONS: dict[str, tuple[str, bool]] = {
    "stream": ("BOOL", True),
    "sampling_parameters": ("BYTES", True),
    "exclude_input_in_output": ("BOOL", True),
    "return_finish_reason": ("BOOL", False),
    "return_cumulative_logprob": ("BOOL", False),
    "return_logprobs": ("BOOL", False),
    "return_num_input_tokens": ("BOOL", False),
    "return_num_output_tokens": ("BOOL", False),
}


def is_convention(name: str, datatype: str) -> bool:
    known = CONVENTIONS.get(name.lower())
    return known is not None and known[0] == datatype


def sent_when_optional(name: str, datatype: str, decoupled: bool) -> bool:
    """An optional conventional input the request carries anyway (streaming needs them)."""
    return decoupled and is_convention(name, datatype) and CONVENTIONS[name.lower()][1]


def conventional_value(name: str, shape: list[int], *, decoupled: bool, max_tokens: int = DEFAULT_BUDGET) -> np.ndarray:
    """The value a conventional input gets: stream True only on a decoupled model; sampling
    parameters asking for `max_tokens` greedily; the input left out of the output; no extras."""
    key = name.lower()
    count = int(np.prod(shape)) if shape else 1
    if key == "sampling_parameters":
        text = json.dumps({"max_tokens": max_tokens, "temperature": 0.0})
        return np.array([text.encode()] * count, dtype=np.object_).reshape(shape)
    value = {"stream": decoupled, "exclude_input_in_output": True}.get(key, False)
    return np.full(shape, value, dtype=np.bool_)


def text_tensor(text: str, shape: list[int]) -> np.ndarray:
    return np.array([text.encode()] * (int(np.prod(shape)) if shape else 1), dtype=np.object_).reshape(shape)
