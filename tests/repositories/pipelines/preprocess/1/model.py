"""preprocess: SCALED = RAW * 2."""
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        return [pb_utils.InferenceResponse(output_tensors=[
            pb_utils.Tensor("SCALED", pb_utils.get_input_tensor_by_name(r, "RAW").as_numpy() * 2)])
            for r in requests]
