"""Validates a request as TensorRT-LLM's BLS model does: text_input and max_tokens required
(max_tokens at least 1), the sampling inputs optional with their types, beam_width above 1 refused
while streaming, stream honoured only because the model is decoupled. Answers the prompt's words
(one response per token when streaming) and the final flag. The broken twin was deployed for
non-streaming use: it refuses stream=true as a non-decoupled TensorRT-LLM model does."""
import json
import threading
import time

import numpy as np
import triton_python_backend_utils as pb_utils

FINAL = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL


def scalar(request, name, default=None):
    tensor = pb_utils.get_input_tensor_by_name(request, name)
    return tensor.as_numpy().reshape(-1)[0] if tensor is not None else default


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
            text = scalar(request, "text_input")
            if text is None:
                raise ValueError("text_input is required")
            prompt = text.decode("utf-8")
            max_tokens = int(scalar(request, "max_tokens", 0))
            if max_tokens < 1:
                raise ValueError(f"max_tokens must be a positive integer, got {max_tokens}")
            stream = bool(scalar(request, "stream", False))
            if stream and self.broken:
                raise ValueError("Streaming is only supported if model is deployed using decoupled mode.")
            if stream and int(scalar(request, "beam_width", 1)) > 1:
                raise ValueError("Streaming is not supported with beam_width > 1")
            if not 0.0 <= float(scalar(request, "top_p", 1.0)) <= 1.0:
                raise ValueError("top_p must be within [0, 1]")
        except (ValueError, UnicodeDecodeError) as exc:
            sender.send(pb_utils.InferenceResponse(error=pb_utils.TritonError(str(exc))), flags=FINAL)
            return
        words = (prompt.split() * 8)[:max_tokens]
        pieces = [[w] for w in words] if stream else [words]
        for piece in pieces:
            time.sleep(0.002)
            sender.send(pb_utils.InferenceResponse(output_tensors=[
                pb_utils.Tensor("text_output", np.array([[" ".join(piece).encode()]], dtype=np.object_)),
                pb_utils.Tensor("cum_log_probs", np.array([[-0.5 * len(piece)]], dtype=np.float32)),
                pb_utils.Tensor("batch_index", np.array([[0]], dtype=np.int32)),
            ]))
        sender.send(flags=FINAL)
