"""Demo model `accumulate`: OUTPUT0 = running sum of INPUT0 over one sequence (correlation id).

START resets the sum; the state lives in the instance, which is why the model needs the
sequence batcher rather than the dynamic batcher. numpy on CPU instances; on GPU instances torch
through DLPack, with each sequence's sum kept on the device (numpy never builds an output there,
which also keeps the model working where the stub's numpy ABI differs from the installed numpy).
"""
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.totals = {}
        self.on_gpu = args["model_instance_kind"] == "GPU"
        if self.on_gpu:
            import torch

            self.torch = torch
            self.device = torch.device("cuda", int(args["model_instance_device_id"]))

    def execute(self, requests):
        run = self._execute_gpu if self.on_gpu else self._execute_cpu
        return [run(request) for request in requests]

    def _execute_cpu(self, request):
        values = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
        starts = pb_utils.get_input_tensor_by_name(request, "START").as_numpy().reshape(-1)
        ids = pb_utils.get_input_tensor_by_name(request, "CORRID").as_numpy().reshape(-1)
        out = np.empty_like(values)
        for row, (start, corrid) in enumerate(zip(starts, ids, strict=False)):
            key = int(corrid)
            base = 0.0 if start else self.totals.get(key, 0.0)
            self.totals[key] = base + float(values[row].sum())
            out[row] = self.totals[key]
        return pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor("OUTPUT0", out)])

    def _execute_gpu(self, request):
        torch, dlpack = self.torch, self.torch.utils.dlpack

        def tensor(name):
            return dlpack.from_dlpack(pb_utils.get_input_tensor_by_name(request, name).to_dlpack())

        values = tensor("INPUT0").to(self.device)
        starts = tensor("START").reshape(-1).tolist()
        # CORRID is UINT64; reinterpreting the bits as int64 gives a stable key without uint64 arithmetic.
        ids = tensor("CORRID").reshape(-1).view(torch.int64).tolist()
        out = torch.empty_like(values)
        for row, (start, key) in enumerate(zip(starts, ids, strict=False)):
            base = self.totals.get(key) if not start else None
            total = values[row].sum() if base is None else base + values[row].sum()
            self.totals[key] = total
            out[row] = total
        return pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor.from_dlpack("OUTPUT0", dlpack.to_dlpack(out))])
