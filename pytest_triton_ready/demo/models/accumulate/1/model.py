"""Demo model `accumulate`: OUTPUT0 = running sum of INPUT0 over one sequence (correlation id).

START resets the sum; the state lives in the instance, which is why the model needs the
sequence batcher rather than the dynamic batcher.
"""
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.totals = {}

    def execute(self, requests):
        responses = []
        for request in requests:
            values = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            starts = pb_utils.get_input_tensor_by_name(request, "START").as_numpy().reshape(-1)
            ids = pb_utils.get_input_tensor_by_name(request, "CORRID").as_numpy().reshape(-1)
            out = np.empty_like(values)
            for row, (start, corrid) in enumerate(zip(starts, ids)):
                key = int(corrid)
                base = 0.0 if start else self.totals.get(key, 0.0)
                self.totals[key] = base + float(values[row].sum())
                out[row] = self.totals[key]
            responses.append(pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor("OUTPUT0", out)]))
        return responses
