"""A decoupled model whose every answer is one response sent together with the final flag: the
request's MAX_TOKENS words joined into one TOKEN string after `delay_ms`, from a thread pool of
`concurrent_requests` (config.pbtxt parameters)."""

import json
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import triton_python_backend_utils as pb_utils

FINAL = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL


class TritonPythonModel:
    def initialize(self, args):
        params = {k: v.get("string_value", "") for k, v in json.loads(args["model_config"]).get("parameters", {}).items()}
        self.delay = float(params.get("delay_ms", "10")) / 1000.0
        self.pool = ThreadPoolExecutor(max_workers=int(params.get("concurrent_requests", "64")))

    def execute(self, requests):
        for request in requests:
            self.pool.submit(self._answer, request)
        return None

    def _answer(self, request):
        sender = request.get_response_sender()
        try:
            count = int(pb_utils.get_input_tensor_by_name(request, "MAX_TOKENS").as_numpy().reshape(-1)[0])
            text = " ".join(f"w{i}" for i in range(max(1, count)))
            time.sleep(self.delay)
            response = pb_utils.InferenceResponse(output_tensors=[
                pb_utils.Tensor("TOKEN", np.array([text.encode()], dtype=np.object_))])
        except Exception as exc:  # answered as an error, never left without its final flag
            response = pb_utils.InferenceResponse(error=pb_utils.TritonError(f"one_response: {exc}"))
        sender.send(response, flags=FINAL)

    def finalize(self):
        self.pool.shutdown(wait=True)
