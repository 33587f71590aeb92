"""Test model `fragile`: echoes INPUT0, until a request of more than 1 Mi elements arrives; from
then on every request fails, as a model does whose device context an out-of-memory error poisoned.
Triton keeps reporting it READY: only a real request shows the damage."""
import triton_python_backend_utils as pb_utils

LIMIT_ELEMENTS = 1 << 20


class TritonPythonModel:
    def initialize(self, args):
        self.poisoned = False

    def execute(self, requests):
        responses = []
        for request in requests:
            array = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            if array.size > LIMIT_ELEMENTS:
                self.poisoned = True
            if self.poisoned:
                error = pb_utils.TritonError("out of memory: the execution context is unusable since an oversize request")
                responses.append(pb_utils.InferenceResponse(output_tensors=[], error=error))
                continue
            responses.append(pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor("OUTPUT0", array)]))
        return responses
