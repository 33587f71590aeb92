"""Demo model `scale`: OUTPUT0 = 2 * INPUT0 + 1. numpy on CPU instances, torch via DLPack on GPU."""
import triton_python_backend_utils as pb_utils

MAX_VALUES_PER_REQUEST = 1 << 20  # 4 MiB of FP32: a variable dimension still gets a bound


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
            values = 1
            for dim in tensor.shape():
                values *= dim
            if values > MAX_VALUES_PER_REQUEST:
                message = f"INPUT0 carries {values} values; at most {MAX_VALUES_PER_REQUEST} are accepted"
                responses.append(pb_utils.InferenceResponse(
                    error=pb_utils.TritonError(message, pb_utils.TritonError.INVALID_ARG)))
                continue
            if self.on_gpu:
                dlpack = self.torch.utils.dlpack
                x = dlpack.from_dlpack(tensor.to_dlpack()).to(self.device)
                output = pb_utils.Tensor.from_dlpack("OUTPUT0", dlpack.to_dlpack(x * 2 + 1))
            else:
                output = pb_utils.Tensor("OUTPUT0", tensor.as_numpy() * 2 + 1)
            responses.append(pb_utils.InferenceResponse(output_tensors=[output]))
        return responses
