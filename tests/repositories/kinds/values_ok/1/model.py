"""Needs declared values: WAIT_MS (FP32, per batch row) is a wait in milliseconds that must lie in
[0, 5]; the model waits that long and answers DONE = WAIT_MS. The broken twin refuses waits above 1 ms."""
import json
import time

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
        wait = pb_utils.get_input_tensor_by_name(request, "WAIT_MS").as_numpy()
        limit = 1.0 if self.broken else 5.0
        if wait.min() < 0 or wait.max() > limit:
            raise ValueError(f"WAIT_MS must be within [0, {limit:g}] ms, got {wait.min():g}..{wait.max():g}")
        time.sleep(float(wait.max()) / 1000.0)
        return pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor("DONE", wait.astype(np.float32))])
