"""A stateful accumulator on the sequence batcher: TOTAL is the sum of VALUE over the sequence so
far. START resets the correlation id's state, END forgets it, a step of a sequence that never
started is refused. The broken twin keeps one running total for the whole instance (state not
kept per correlation id), so interleaved sequences mix their totals."""
import json

import numpy as np
import triton_python_backend_utils as pb_utils


def flag(request, name):
    return bool(pb_utils.get_input_tensor_by_name(request, name).as_numpy().reshape(-1)[0])


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        self.broken = config.get("parameters", {}).get("broken", {}).get("string_value") == "true"
        self.totals = {}

    def execute(self, requests):
        responses = []
        for request in requests:
            corrid = pb_utils.get_input_tensor_by_name(request, "CORRID").as_numpy().reshape(-1)[0]
            key = "instance" if self.broken else (corrid.decode() if isinstance(corrid, bytes) else int(corrid))
            value = pb_utils.get_input_tensor_by_name(request, "VALUE").as_numpy().astype(np.int64)
            if flag(request, "START") or (self.broken and key not in self.totals):
                self.totals[key] = 0
            elif key not in self.totals:
                responses.append(pb_utils.InferenceResponse(error=pb_utils.TritonError(
                    f"sequence {key} sent a step without START")))
                continue
            self.totals[key] += int(value.sum())
            total = np.full(value.shape, self.totals[key] % (1 << 31), dtype=np.int32)
            if flag(request, "END") and not self.broken:
                del self.totals[key]
            responses.append(pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor("TOTAL", total)]))
        return responses
