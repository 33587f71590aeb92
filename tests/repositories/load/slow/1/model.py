"""slow: OUTPUT0 = INPUT0 after 50 ms of sleep per request (capacity about 20 requests/s)."""
import time

import triton_python_backend_utils as pb_utils

SERVICE_TIME_S = 0.05


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            time.sleep(SERVICE_TIME_S)
            tensor = pb_utils.get_input_tensor_by_name(request, "INPUT0")
            responses.append(pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor("OUTPUT0", tensor.as_numpy())]))
        return responses
