"""A streaming model written elsewhere: PROMPT is INT32 token ids, MAX_TOKENS the budget; it sends
MAX_TOKENS responses of one INT32 TOKEN each ((sum of the prompt + 3 i) mod 32000), then the
final flag. The broken twin sends its tokens but never the final flag."""
import json
import threading
import time

import numpy as np
import triton_python_backend_utils as pb_utils

FINAL = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        self.broken = config.get("parameters", {}).get("broken", {}).get("string_value") == "true"
        self.held = []  # the broken twin's senders, never closed

    def execute(self, requests):
        for request in requests:
            threading.Thread(target=self.generate, args=(request,), daemon=True).start()
        return None

    def generate(self, request):
        sender = request.get_response_sender()
        prompt = pb_utils.get_input_tensor_by_name(request, "PROMPT").as_numpy()
        count = int(pb_utils.get_input_tensor_by_name(request, "MAX_TOKENS").as_numpy().reshape(-1)[0])
        if count < 1 or count > 256:
            sender.send(pb_utils.InferenceResponse(error=pb_utils.TritonError(f"MAX_TOKENS must be 1..256, got {count}")),
                        flags=FINAL)
            return
        base = int(prompt.astype(np.int64).sum())
        for i in range(count):
            time.sleep(0.002)
            token = np.array([(base + 3 * i) % 32000], dtype=np.int32)
            sender.send(pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor("TOKEN", token)]))
        if self.broken:
            self.held.append(sender)
            return
        sender.send(flags=FINAL)
