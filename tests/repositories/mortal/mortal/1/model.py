"""Test model `mortal`: OUTPUT0 = INPUT0 after `execute_ms`; the instance named `mortal_instance`
exits its stub process (os._exit) at its `die_after`-th request, as a model that crashes does.
It dies once per server process (a marker file named after the server's pid): after an unload +
load the model stays healthy, so that a recovery can be seen to work."""
import json
import os
import tempfile
import time

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        parameters = json.loads(args["model_config"]).get("parameters", {})
        self.die_after = int(parameters["die_after"]["string_value"])
        self.execute_s = float(parameters["execute_ms"]["string_value"]) / 1000.0
        self.marker = os.path.join(tempfile.gettempdir(), f"triton-ready-mortal-died-{os.getppid()}")
        self.mortal = (args["model_instance_name"] == parameters["mortal_instance"]["string_value"]
                       and not os.path.exists(self.marker))
        self.served = 0

    def execute(self, requests):
        responses = []
        for request in requests:
            self.served += 1
            if self.mortal and self.served >= self.die_after:
                with open(self.marker, "w") as marker:
                    marker.write(f"{time.time()}\n")
                os._exit(3)
            tensor = pb_utils.get_input_tensor_by_name(request, "INPUT0")
            time.sleep(self.execute_s)
            responses.append(pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor("OUTPUT0", tensor.as_numpy())]))
        return responses
