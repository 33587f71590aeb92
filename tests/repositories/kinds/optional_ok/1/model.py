"""An optional input: A (FP32 [4]) is scaled by MASK (INT32 [4], optional, each 0 or 1) when given.
The broken twin declares MASK optional but crashes without it."""
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
        a = pb_utils.get_input_tensor_by_name(request, "A").as_numpy()
        mask = pb_utils.get_input_tensor_by_name(request, "MASK")
        if mask is None and self.broken:
            raise ValueError("'NoneType' object has no attribute 'as_numpy'")
        if mask is not None:
            m = mask.as_numpy()
            if not np.isin(m, (0, 1)).all():
                raise ValueError("MASK must hold only 0 and 1")
            a = a * m
        return pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor("Y", a.astype(np.float32))])
