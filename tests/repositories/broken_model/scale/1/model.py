"""Demo model `scale`: OUTPUT0 = 2 * INPUT0 + 1. numpy on CPU instances, torch via DLPack on GPU."""
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.on_gpu = args["model_instance_kind"] == "GPU"
        if self.on_gpu:
            import torch

            self.torch = torch
            self.device = torch.device("cuda", int(args["model_instance_device_id"]))

    def execute(self, requests):
        responses = []
        for request in requests:
            tensor = pb_utils.get_input_tensor_by_name(request, "INPUT0")
            if self.on_gpu:
                dlpack = self.torch.utils.dlpack
                x = dlpack.from_dlpack(tensor.to_dlpack()).to(self.device)
                output = pb_utils.Tensor.from_dlpack("OUTPUT0", dlpack.to_dlpack(x * 2 + 1))
            else:
                output = pb_utils.Tensor("OUTPUT0", tensor.as_numpy() * 2 + 1)
            responses.append(pb_utils.InferenceResponse(output_tensors=[output]))
        return responses
