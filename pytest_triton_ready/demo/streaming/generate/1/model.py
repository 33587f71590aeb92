"""Demo model `generate`: a decoupled (streaming) python-backend model that behaves like a small LLM
on CPU, deterministically, so that a client can verify every answer.

Request: PROMPT (one string) and MAX_TOKENS (one int32). Responses: MAX_TOKENS responses, each with
one TOKEN string, then an empty response with TRITONSERVER_RESPONSE_COMPLETE_FINAL. Token i of a
prompt is VOCABULARY[(crc32(prompt) + 7 * i + i * i) % len(VOCABULARY)] (the same function is
`expected_tokens` in pytest_triton_ready/load/streaming.py).

Model parameters (config.pbtxt):
  first_token_delay_ms   time to the first token ("prefill"), default 20
  token_delay_ms         time between tokens ("decode"), default 5
  max_tokens_limit       larger MAX_TOKENS is an INVALID_ARG error
  concurrent_requests    requests generated at once by one instance (a thread each)
  missing_final_every    test fault: every Nth request of an instance sends its tokens but never the
                         final flag (0, the default: never). Its sender is held, so Triton counts the
                         request as outstanding: an unload of the model then never finishes (UNLOADING).

A request cancelled by the client (gRPC) stops at the next token and ends with a CANCELLED error
carrying the final flag, as the python backend asks of decoupled models.
"""
import threading
import time
import zlib
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import triton_python_backend_utils as pb_utils

VOCABULARY = ("the", "a", "model", "serves", "tokens", "fast", "and", "every", "request", "ends",
              "with", "final", "flag", "stream", "of", "words", "on", "cpu", "triton", "ready")


def token(prompt, i):
    return VOCABULARY[(zlib.crc32(prompt) + 7 * i + i * i) % len(VOCABULARY)]


class TritonPythonModel:
    def initialize(self, args):
        import json

        params = {k: v.get("string_value", "") for k, v in json.loads(args["model_config"]).get("parameters", {}).items()}
        self.first_delay = float(params.get("first_token_delay_ms", "20")) / 1000.0
        self.token_delay = float(params.get("token_delay_ms", "5")) / 1000.0
        self.limit = int(params.get("max_tokens_limit", "512"))
        self.missing_final_every = int(params.get("missing_final_every", "0") or 0)
        self.pool = ThreadPoolExecutor(max_workers=int(params.get("concurrent_requests", "64")))
        self.lock = threading.Lock()
        self.served = 0
        self.held = []  # senders of requests that never got their final flag (the fault)

    def execute(self, requests):
        for request in requests:
            with self.lock:
                self.served += 1
                withhold = self.missing_final_every > 0 and self.served % self.missing_final_every == 0
            self.pool.submit(self._generate, request, withhold)
        return None

    def _generate(self, request, withhold):
        sender = request.get_response_sender()
        final = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL
        try:
            prompt = pb_utils.get_input_tensor_by_name(request, "PROMPT").as_numpy().reshape(-1)[0]
            prompt = prompt if isinstance(prompt, bytes) else str(prompt).encode()
            count = int(pb_utils.get_input_tensor_by_name(request, "MAX_TOKENS").as_numpy().reshape(-1)[0])
            if count < 0 or count > self.limit:
                raise ValueError(f"MAX_TOKENS is {count}; it must be between 0 and {self.limit}")
        except Exception as exc:  # a bad request ends with an error, never without a final flag
            sender.send(pb_utils.InferenceResponse(error=pb_utils.TritonError(
                str(exc), getattr(pb_utils.TritonError, "INVALID_ARG", 3))), flags=final)
            return
        time.sleep(self.first_delay)
        for i in range(count):
            if request.is_cancelled():
                code = getattr(pb_utils.TritonError, "CANCELLED", None)
                error = pb_utils.TritonError(f"request cancelled after {i} of {count} tokens",
                                             *((code,) if code is not None else ()))
                sender.send(pb_utils.InferenceResponse(error=error), flags=final)
                return
            if i:
                time.sleep(self.token_delay)
            text = np.array([token(prompt, i).encode()], dtype=np.object_)
            sender.send(pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor("TOKEN", text)]))
        if withhold:
            with self.lock:
                self.held.append(sender)
            return
        sender.send(flags=final)

    def finalize(self):
        self.pool.shutdown(wait=False, cancel_futures=True)
        with self.lock:
            held, self.held = self.held, []
        for sender in held:  # reached only if Triton ever finalizes the instance with requests outstanding
            try:
                sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
            except Exception:
                pass
