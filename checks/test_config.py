"""Phase "config": the server accepts every model configuration and every model serves.

CFG-1 starts here: the server is live and ready, every model in scope is READY (with the server's
reason when not), and every model answers a real inference with the outputs it declares; the
model configs lint clean (rules in docs/config-rules.md). CFG-3: the version policy is written out
and served as written. CFG-4: GPU memory, host memory and the pinned pool once every model is loaded.
"""

import pytest

from pytest_triton_ready.config.resources import gpu_memory_use, host_memory_use, pinned_pool_bytes, polled_snapshot
from pytest_triton_ready.config.versions import judge_version_policy
from pytest_triton_ready.lint.deployment import lint_deployment
from pytest_triton_ready.lint.sources import deployment_configs, gpu_models
from pytest_triton_ready.server.models import defer_to_streaming, initial_state_of, ready_models, served_as
from pytest_triton_ready.serving import judge_answers, judge_models_ready

pytestmark = pytest.mark.usefixtures("triton")


@pytest.mark.triton_check("CFG-1")
def test_server_live_and_ready(triton, check):
    """The server is live and ready: /v2/health/live and /v2/health/ready answer 200."""
    client = triton.client
    check.measure("server live (HTTP 200)", client.get_status("/v2/health/live"), "status",
                  threshold=200, comparison="==", finding="/v2/health/live does not answer 200")
    status = client.get_status("/v2/health/ready")
    if not check.measure("server ready (HTTP 200)", status, "status", threshold=200, comparison="=="):
        failed = initial_state_of(triton).not_ready
        check.finding(f"/v2/health/ready answers {status}: with strict readiness a model that failed to "
                      "load keeps the whole server out of rotation"
                      + (f" (not READY when the run started: {', '.join(failed)})" if failed else ""))
        check.recommend("Fix or remove the models listed by CFG-1 (model READY) and restart the server.")


@pytest.mark.triton_check("CFG-1")
def test_models_ready(triton, check):
    """Every model in scope is READY in the repository index and on its ready endpoint."""
    judge_models_ready(check, triton)


@pytest.mark.triton_check("CFG-1")
def test_models_answer_inference(triton, check):
    """Every READY model answers a real inference (its `inputs.data` entries where declared, else
    synthesized inputs) with the output names, shapes and datatypes it declares; its answers match
    the team's `expectations:` (and a data file's validation_data) where declared; a stateless
    model answers the same input with the same output (an error where it is declared
    deterministic, else a warning). Where every READY model in scope is decoupled, NOT
    APPLICABLE: test_streaming_answers_end_with_final_flag asks them."""
    models = ready_models(triton)  # decoupled models answer over streams: checks/test_streaming.py
    defer_to_streaming(check, triton, models)
    if not models:
        check.incomplete("no READY model to send an inference to")
    served = served_as(triton, models)
    check.evidence("models and versions sent to", "; ".join(served.values()))
    judge_answers(check, triton, models, served)


# -- CFG-1 (the lint), CFG-3 (version policy), CFG-4 (resource limits) ---------------------------
@pytest.mark.triton_check("CFG-1")
def test_model_configs_lint_clean(triton, triton_settings, gpu, check):
    """Every model config parses against Triton's ModelConfig message and breaks no lint rule of
    severity error (docs/config-rules.md); warnings are reported without failing."""
    lint_deployment(check, triton, triton_settings, gpu)


@pytest.mark.triton_check("CFG-3")
def test_version_policy_explicit_and_served(triton, triton_settings, check):
    """Every model writes its version_policy out, the server serves exactly the versions it selects,
    and a model under a declared canary or blue-green rollout has at least two versions servable."""
    judge_version_policy(check, deployment_configs(triton), triton.client.repository_index(),
                         triton_settings.section_model("lint").rollout)


@pytest.mark.triton_check("CFG-4")
def test_gpu_memory_headroom(triton, triton_settings, gpu, check):
    """With every model loaded, each GPU's memory use stays under gpu_memory_used_max_fraction (90%)."""
    readings = gpu.read()
    if not readings:
        on_gpu = gpu_models(triton)
        if not on_gpu:
            check.not_applicable(f"no model has KIND_GPU instances, and no GPU can be read ({gpu.unavailable_reason})")
        check.incomplete(f"{', '.join(on_gpu)} run KIND_GPU instances but no GPU can be read: {gpu.unavailable_reason}")
    uses = gpu_memory_use(readings)
    if not uses:
        check.incomplete(f"the GPU readings ({gpu.source}) carry no memory used/total")
    limit = check.threshold("gpu_memory_used_max_fraction")
    check.evidence("GPU readings", f"source: {gpu.source}")
    for use in uses:
        check.measure(f"{use.label} memory used", round(use.used_bytes / 1e9, 3), "GB")
        check.measure(f"{use.label} memory used fraction", round(use.fraction, 4), "ratio", threshold=limit,
                      finding=f"{use.label} uses {use.fraction:.1%} of its {use.total_bytes / 1e9:.1f} GB, above "
                              f"{limit.value:.0%}: a new model version or a traffic peak has no room to load")
    if check.errors:
        check.recommend("Lower instance_group counts, move models to other GPUs, or add GPUs.")


@pytest.mark.triton_check("CFG-4")
def test_host_memory_headroom(triton, triton_settings, triton_metrics, check):
    """With every model loaded, host memory use (nv_cpu_memory_used/total_bytes) stays under
    cpu_memory_used_max_fraction (90%)."""
    use = host_memory_use(polled_snapshot(triton_metrics))
    if use is None:
        check.incomplete("the server exports no nv_cpu_memory_used_bytes / nv_cpu_memory_total_bytes "
                         "(started with --allow-cpu-metrics=false?)")
    check.measure("host memory used", round(use.used_bytes / 1e9, 3), "GB")
    check.measure("host memory used fraction", round(use.fraction, 4), "ratio",
                  threshold=check.threshold("cpu_memory_used_max_fraction"),
                  finding=f"the host uses {use.fraction:.1%} of its {use.total_bytes / 1e9:.1f} GB: python stubs, "
                          "CPU instances and request buffers have no headroom left")


@pytest.mark.triton_check("CFG-4")
def test_pinned_memory_pool_set(triton, triton_metrics, check):
    """The pinned (page-locked) memory pool is set: nv_pinned_memory_pool_total_bytes > 0 on a
    deployment with KIND_GPU instances."""
    pool = pinned_pool_bytes(polled_snapshot(triton_metrics))
    if pool is None:
        check.incomplete("the server exports no nv_pinned_memory_pool_total_bytes")
    if pool == 0 and not gpu_models(triton):
        check.not_applicable("the pinned pool is 0 bytes, and it only speeds host-GPU copies: no model has "
                             "KIND_GPU instances (a server without CUDA allocates no pool)")
    if not check.measure("pinned memory pool", round(pool / 2**20, 1), "MiB", threshold=0, comparison=">",
                         finding="the pinned memory pool is 0 bytes, so host-device copies go through pageable "
                                 "memory and are slower"):
        check.recommend("Start tritonserver with --pinned-memory-pool-byte-size (default 268435456).")
