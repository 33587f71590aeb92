"""Healthy for a while, then fails one request in `fail_every`: the soak must fail the right window."""
import json
import time

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        parameters = json.loads(args["model_config"]).get("parameters", {})
        self.healthy_s = float(parameters["healthy_s"]["string_value"])
        self.fail_every = int(parameters["fail_every"]["string_value"])
        self.first_request_at = None
        self.after_onset = 0

    def execute(self, requests):
        now = time.monotonic()
        if self.first_request_at is None:
            self.first_request_at = now
        responses = []
        for request in requests:
            if now - self.first_request_at >= self.healthy_s:
                self.after_onset += 1
                if self.after_onset % self.fail_every == 0:
                    onset = self.first_request_at + self.healthy_s
                    responses.append(pb_utils.InferenceResponse(error=pb_utils.TritonError(
                        f"flaky: injected failure {self.after_onset // self.fail_every}, "
                        f"{now - onset:.1f} s after the onset")))
                    continue
            tensor = pb_utils.get_input_tensor_by_name(request, "INPUT0")
            responses.append(pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor("OUTPUT0", tensor.as_numpy())]))
        return responses
