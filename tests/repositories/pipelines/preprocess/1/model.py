"""preprocess: SCALED = RAW * 2; an execution whose RAW holds a non-finite value raises (Triton
fails the requests of that execution and counts them as failed in the model's statistics)."""
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        raws = [pb_utils.get_input_tensor_by_name(r, "RAW").as_numpy() for r in requests]
        if not all(np.isfinite(raw).all() for raw in raws):
            raise pb_utils.TritonModelException("RAW holds non-finite values")
        return [pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor("SCALED", raw * 2)]) for raw in raws]
