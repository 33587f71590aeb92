"""drifting: OUTPUT0 = INPUT0 after a sleep that grows by 0.1 ms with every request served."""
import time

import triton_python_backend_utils as pb_utils

GROWTH_S = 0.0001


class TritonPythonModel:
    def initialize(self, args):
        self.served = 0

    def execute(self, requests):
        responses = []
        for request in requests:
            self.served += 1
            time.sleep(self.served * GROWTH_S)
            tensor = pb_utils.get_input_tensor_by_name(request, "INPUT0")
            responses.append(pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor("OUTPUT0", tensor.as_numpy())]))
        return responses
