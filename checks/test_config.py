"""Phase "config": the server accepts every model configuration and every model serves.

CFG-1 starts here: the server is live and ready, every model in scope is READY (with the server's
reason when not), and every model answers a real inference with the outputs it declares.
"""

import numpy as np
import pytest

pytestmark = pytest.mark.usefixtures("triton")


@pytest.mark.triton_check("CFG-1")
def test_server_live_and_ready(triton, check):
    """The server is live and ready: /v2/health/live and /v2/health/ready answer 200."""
    client = triton.client
    check.measure("server live (HTTP 200)", client.get_status("/v2/health/live"), "status",
                  threshold=200, comparison="==", finding="/v2/health/live does not answer 200")
    status = client.get_status("/v2/health/ready")
    if not check.measure("server ready (HTTP 200)", status, "status", threshold=200, comparison="=="):
        check.finding(f"/v2/health/ready answers {status}: with strict readiness a model that failed to "
                      "load keeps the whole server out of rotation")
        check.recommend("Fix or remove the models listed by CFG-1 (model READY) and restart the server.")


@pytest.mark.triton_check("CFG-1")
def test_models_ready(triton, check):
    """Every model in scope is READY in the repository index and on its ready endpoint."""
    index = {}
    for entry in triton.client.repository_index():
        index.setdefault(entry["name"], []).append(entry)
    models = triton.models()
    if not models:
        check.finding("the repository index lists no model at all")
    for model in models:
        entries = index.get(model)
        if not entries:
            check.finding(f"{model}: not in the repository index", model=model)
            continue
        for entry in entries:
            state = entry.get("state") or "UNKNOWN"
            version = entry.get("version") or "?"
            check.measure("state", state, model=f"{model}/{version}")
            if state != "READY":
                reason = entry.get("reason") or "the server gave no reason"
                check.finding(f"{model} version {version} is {state}: {reason}", model=model, rule="CFG-1")
                check.evidence(f"{model} load failure", reason)
        if any(e.get("state") == "READY" for e in entries) and not triton.client.model_ready(model):
            check.finding(f"{model}: READY in the index but /v2/models/{model}/ready does not answer 200", model=model)
    if check.errors:
        check.recommend("Read each reason above: fix the config.pbtxt or model files it names, then load the model again.")


@pytest.mark.triton_check("CFG-1")
def test_models_answer_inference(triton, check):
    """Every READY model answers a real inference with the output names, shapes and datatypes it
    declares, and a stateless model answers the same input with the same output."""
    from pytest_triton_ready.inputs import output_mismatches

    client = triton.client
    ready = {e["name"] for e in client.repository_index() if e.get("state") == "READY"}
    models = [m for m in triton.models() if m in ready]
    if not models:
        check.incomplete("no READY model to send an inference to")
    for model in models:
        outcome = client.infer(model)
        check.measure("inference latency", round(outcome.latency_s * 1000, 3), "ms", model=model)
        if not outcome.ok:
            check.finding(f"{model}: inference failed: {outcome.error}", model=model)
            check.evidence(f"{model} error", outcome.error or "")
            continue
        for problem in output_mismatches(client.model_metadata(model), client.model_config(model), outcome.outputs):
            check.finding(f"{model}: {problem}", model=model)
        if client.is_sequence_model(model):
            continue
        again = client.infer(model, outcome.inputs)
        if again.ok and not all(np.array_equal(outcome.outputs[n], again.outputs.get(n)) for n in outcome.outputs):
            check.finding(f"{model}: the same input gave different outputs on two requests", severity="warning",
                          model=model, rule="determinism")
