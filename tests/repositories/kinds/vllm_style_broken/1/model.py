"""Validates a request as the vLLM backend does (vllm_backend src/utils/request.py and
TritonSamplingParams): text_input required; stream, exclude_input_in_output, return_* optional
BOOLs; streaming with exclude_input_in_output False is refused; sampling_parameters must be a
JSON object of known SamplingParams fields with the right types. Then "generates" the prompt's
words back (one response per word when streaming), ending with the final flag. The broken twin
reads a sampling parameter that no request carries and fails every request."""
import json
import threading
import time

import numpy as np
import triton_python_backend_utils as pb_utils

FINAL = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL
FIELDS = {"n": int, "best_of": int, "presence_penalty": float, "frequency_penalty": float,
          "repetition_penalty": float, "temperature": float, "top_p": float, "top_k": int, "min_p": float,
          "seed": int, "stop": list, "ignore_eos": bool, "max_tokens": int, "min_tokens": int,
          "logprobs": int, "skip_special_tokens": bool}


def optional_bool(request, name, default):
    tensor = pb_utils.get_input_tensor_by_name(request, name)
    return bool(tensor.as_numpy()[0]) if tensor is not None else default


def sampling(request):
    tensor = pb_utils.get_input_tensor_by_name(request, "sampling_parameters")
    if tensor is None:
        return {}
    params = json.loads(tensor.as_numpy()[0].decode("utf-8"))
    if not isinstance(params, dict):
        raise ValueError("sampling_parameters must be a JSON object")
    for key, value in params.items():
        if key not in FIELDS:
            raise ValueError(f"SamplingParams.__init__() got an unexpected keyword argument '{key}'")
        kind = FIELDS[key]
        if kind is float and isinstance(value, int):
            value = float(value)
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise ValueError(f"sampling parameter {key} must be {kind.__name__}, got {value!r}")
    if params.get("max_tokens", 16) < 1:
        raise ValueError(f"max_tokens must be at least 1, got {params['max_tokens']}.")
    return params


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        self.broken = config.get("parameters", {}).get("broken", {}).get("string_value") == "true"

    def execute(self, requests):
        for request in requests:
            threading.Thread(target=self.generate, args=(request,), daemon=True).start()
        return None

    def generate(self, request):
        sender = request.get_response_sender()
        try:
            prompt = pb_utils.get_input_tensor_by_name(request, "text_input").as_numpy()[0].decode("utf-8")
            stream = optional_bool(request, "stream", False)
            exclude = pb_utils.get_input_tensor_by_name(request, "exclude_input_in_output")
            prepend = (not bool(exclude.as_numpy()[0])) if exclude is not None else not stream
            if prepend and stream:
                raise ValueError("When streaming, `exclude_input_in_output` = False is not allowed.")
            params = sampling(request)
            if self.broken:
                params["n"] = int(params["best_of"])
            finish = optional_bool(request, "return_finish_reason", False)
            count_tokens = optional_bool(request, "return_num_output_tokens", False)
        except (ValueError, KeyError, UnicodeDecodeError) as exc:
            sender.send(pb_utils.InferenceResponse(error=pb_utils.TritonError(f"{type(exc).__name__}: {exc}")), flags=FINAL)
            return
        words = (prompt.split() * 4)[: int(params.get("max_tokens", 16))]
        pieces = [" " + w for w in words] if stream else [(prompt if prepend else "") + " " + " ".join(words)]
        for i, piece in enumerate(pieces):
            time.sleep(0.002)
            outputs = [pb_utils.Tensor("text_output", np.array([piece.encode()], dtype=np.object_))]
            if finish:
                reason = "length" if i == len(pieces) - 1 else "None"
                outputs.append(pb_utils.Tensor("finish_reason", np.array([reason.encode()], dtype=np.object_)))
            if count_tokens:
                outputs.append(pb_utils.Tensor("num_output_tokens", np.array([1 if stream else len(words)], dtype=np.uint32)))
            sender.send(pb_utils.InferenceResponse(output_tensors=outputs))
        sender.send(flags=FINAL)
