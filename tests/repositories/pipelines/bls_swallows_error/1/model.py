"""bls_swallows_error: calls preprocess with its input padded by a NaN sentinel, which preprocess
refuses; it then answers zeros instead of the error: every answer looks fine, none is right."""
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for r in requests:
            raw = pb_utils.get_input_tensor_by_name(r, "INPUT").as_numpy().copy()
            raw[:, -1] = np.nan
            response = pb_utils.InferenceRequest(model_name="preprocess", requested_output_names=["SCALED"],
                                                 inputs=[pb_utils.Tensor("RAW", raw)]).exec()
            score = np.zeros((1, 1), dtype=np.float32)
            if not response.has_error():
                score = pb_utils.get_output_tensor_by_name(response, "SCALED").as_numpy()[:, :1]
            responses.append(pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor("OUTPUT", score)]))
        return responses
