"""Leaks memory on every request: the soak's leak rule must catch it."""
import json

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        parameters = json.loads(args["model_config"]).get("parameters", {})
        self.leak_bytes = int(parameters["leak_bytes_per_request"]["string_value"])
        self.hoard = []

    def execute(self, requests):
        responses = []
        for request in requests:
            self.hoard.append(np.ones(self.leak_bytes, dtype=np.uint8))
            tensor = pb_utils.get_input_tensor_by_name(request, "INPUT0")
            responses.append(pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor("OUTPUT0", tensor.as_numpy())]))
        return responses
