"""bls: calls preprocess, then classify, from its own code (Business Logic Scripting); a callee's
error becomes this model's error."""
import triton_python_backend_utils as pb_utils


def call(model, name, array, output):
    response = pb_utils.InferenceRequest(model_name=model, requested_output_names=[output],
                                         inputs=[pb_utils.Tensor(name, array)]).exec()
    if response.has_error():
        raise pb_utils.TritonModelException(f"{model}: {response.error().message()}")
    return pb_utils.get_output_tensor_by_name(response, output).as_numpy()


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for r in requests:
            try:
                scaled = call("preprocess", "RAW", pb_utils.get_input_tensor_by_name(r, "INPUT").as_numpy(), "SCALED")
                score = call("classify", "FEATURES", scaled, "SCORE")
                responses.append(pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor("OUTPUT", score)]))
            except pb_utils.TritonModelException as exc:
                responses.append(pb_utils.InferenceResponse(error=pb_utils.TritonError(str(exc))))
        return responses
