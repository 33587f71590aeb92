"""BYTES input: TEXT (one UTF-8 string per batch row) answered with LENGTH (INT32), its length in
characters. The broken twin fails every request."""
import json

import numpy as np
import triton_python_backend_utils as pb_utils


def error(message):
    return pb_utils.InferenceResponse(error=pb_utils.TritonError(message))


class Base:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        self.broken = config.get("parameters", {}).get("broken", {}).get("string_value") == "true"

    def execute(self, requests):
        responses = []
        for request in requests:
            try:
                responses.append(self.answer(request))
            except ValueError as exc:
                responses.append(error(str(exc)))
        return responses


class TritonPythonModel(Base):
    def answer(self, request):
        text = pb_utils.get_input_tensor_by_name(request, "TEXT").as_numpy()
        if self.broken:
            raise ValueError("tokenizer not initialized")
        lengths = np.array([[len(t.decode("utf-8"))] for t in text.reshape(-1)], dtype=np.int32).reshape(text.shape)
        return pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor("LENGTH", lengths)])
