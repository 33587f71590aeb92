"""Variable dims that need declaring: X (INT32, dims [-1, -1, -1]) must reshape to [N, 2, 4];
Y is the sum over the last two dims, [N]. The broken twin answers one element short."""
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
        x = pb_utils.get_input_tensor_by_name(request, "X").as_numpy()
        if x.ndim != 3 or x.shape[1:] != (2, 4):
            raise ValueError(f"cannot reshape X of shape {list(x.shape)} into [N, 2, 4]")
        y = x.sum(axis=(1, 2)).astype(np.int32)
        return pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor("Y", y[:-1] if self.broken else y)])
