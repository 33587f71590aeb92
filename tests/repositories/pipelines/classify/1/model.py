"""classify: SCORE = sum(FEATURES ** 2), after 5 ms of work per execution (the pipeline's slow step)."""
import time

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        time.sleep(0.005)
        responses = []
        for r in requests:
            features = pb_utils.get_input_tensor_by_name(r, "FEATURES").as_numpy()
            responses.append(pb_utils.InferenceResponse(output_tensors=[
                pb_utils.Tensor("SCORE", (features ** 2).sum(axis=1, keepdims=True).astype(features.dtype))]))
        return responses
