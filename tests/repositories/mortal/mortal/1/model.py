"""Test model `mortal`: OUTPUT0 = INPUT0 after `execute_ms`; the instance named `mortal_instance`
exits its stub process (os._exit) at its `die_after`-th request, as a model that crashes does.
Every load of the model starts the count again."""
import json
import os
import time

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        parameters = json.loads(args["model_config"]).get("parameters", {})
        self.die_after = int(parameters["die_after"]["string_value"])
        self.mortal = args["model_instance_name"] == parameters["mortal_instance"]["string_value"]
        self.execute_s = float(parameters["execute_ms"]["string_value"]) / 1000.0
        self.served = 0

    def execute(self, requests):
        responses = []
        for request in requests:
            self.served += 1
            if self.mortal and self.served >= self.die_after:
                os._exit(3)
            tensor = pb_utils.get_input_tensor_by_name(request, "INPUT0")
            time.sleep(self.execute_s)
            responses.append(pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor("OUTPUT0", tensor.as_numpy())]))
        return responses
