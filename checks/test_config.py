"""Phase "config": the server accepts every model configuration and every model serves.

CFG-1 starts here: the server is live and ready, every model in scope is READY (with the server's
reason when not), and every model answers a real inference with the outputs it declares; the
model configs lint clean (rules in docs/config-rules.md). CFG-3: the version policy is written out
and served as written. CFG-4: GPU memory, host memory and the pinned pool once every model is loaded.
"""

import numpy as np
import pytest

from pytest_triton_ready.models import defer_to_streaming, initial_state_of, ready_models, ready_names, served_as

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
    index = {}
    for entry in triton.client.repository_index():
        index.setdefault(entry["name"], []).append(entry)
    models = triton.models()
    mark = check.mark()
    if not models:
        check.finding("the repository index lists no model at all")
    never_loaded = triton.launcher.failed_models  # a launched server's reasons, from its log too
    for model in models:
        entries = index.get(model)
        if not entries:
            check.finding(f"{model}: not in the repository index", model=model)
            continue
        for entry in entries:
            if entry.get("state") is None:  # listed by name only: the config never parsed or validated
                reason = never_loaded.get(model) or ("its config.pbtxt failed to parse or validate (the server lists "
                                                     "it without a state; its log names the error)")
                check.measure("state", "NOT LOADED", model=model)
                check.finding(f"{model} was never loaded: {reason}", model=model, rule="CFG-1")
                check.evidence(f"{model} load failure", reason)
                continue
            state, version = entry["state"], entry.get("version") or "?"
            check.measure("state", state, model=f"{model}/{version}")
            if state != "READY":
                reason = entry.get("reason") or "the server gave no reason"
                check.finding(f"{model} version {version} is {state}: {reason}", model=model, rule="CFG-1")
                check.evidence(f"{model} load failure", reason)
        if any(e.get("state") == "READY" for e in entries) and not triton.client.model_ready(model):
            check.finding(f"{model}: READY in the index but /v2/models/{model}/ready does not answer 200", model=model)
    check.judged_since(mark, "model-ready", measured=f"the repository index and ready endpoints of {len(models)} models")
    if check.errors:
        check.recommend("Read each reason above: fix the config.pbtxt or model files it names, then load the model again.")


@pytest.mark.triton_check("CFG-1")
def test_models_answer_inference(triton, check):
    """Every READY model answers a real inference (its `inputs.data` entries where declared, else
    synthesized inputs) with the output names, shapes and datatypes it declares; its answers match
    the team's `expectations:` (and a data file's validation_data) where declared; a stateless
    model answers the same input with the same output (an error where it is declared
    deterministic, else a warning). Where every READY model in scope is decoupled, NOT
    APPLICABLE: test_streaming_answers_end_with_final_flag asks them."""
    from pytest_triton_ready.expectations import answer_mismatches, expectation_for
    from pytest_triton_ready.input_data import InputDataError
    from pytest_triton_ready.inputs import output_mismatches, synthesize_inputs
    from pytest_triton_ready.pipelines import composing_models, failures_between, step_failures
    from pytest_triton_ready.sequences import check_sequences

    client = triton.client
    models = ready_models(triton)  # decoupled models answer over streams: checks/test_streaming.py
    defer_to_streaming(check, triton, models)
    if not models:
        check.incomplete("no READY model to send an inference to")
    served = served_as(triton, models)
    if models:
        check.evidence("models and versions sent to", "; ".join(served.values()))
    for model in models:
        mark = check.mark()
        metadata, config = client.model_metadata(model), client.model_config(model)
        sequence = client.is_sequence_model(model)
        steps = composing_models(model, client.model_config, triton.settings.bls_composing)
        before = step_failures(client, steps)
        try:
            if sequence:  # a whole sequence, then the same one interleaved with another
                answers = check_sequences(client, model)
                outcome = answers.last
                for problem in answers.problems:
                    check.finding(f"{model}: {problem}", model=model, rule="sequence-state")
                check.measure("sequence steps answered", sum(o.ok for o in answers.outcomes), "requests", model=model,
                              threshold=answers.steps, comparison=">=")
            else:
                outcome = client.infer(model)
        except InputDataError as exc:
            check.finding(f"{model}: {exc}", model=model, rule="input-data")
            continue
        check.measure("inference latency", round(outcome.latency_s * 1000, 3), "ms", model=model)
        for step, failed in failures_between(before, step_failures(client, steps)).items():
            check.finding(f"{model}: its composing model {step} failed {failed} request(s) during {model}'s "
                          f"inference" + (", yet the model answered without an error: the error is swallowed"
                                          if outcome.ok else "") + f"; sent to {served[model]}", model=model,
                          rule="pipeline-step-failed")
        if not outcome.ok:
            if not sequence:  # a failed step is already named
                hint = f" {client.refusal_hint(model)}" if outcome.refused else ""  # a timeout is no refusal
                check.finding(f"{model}: inference failed: {outcome.error}{hint}; sent to {served[model]}", model=model)
            check.evidence(f"{model} error", outcome.error or "")
            continue
        for problem in output_mismatches(metadata, config, outcome.outputs):
            check.finding(f"{model}: {problem}", model=model, rule="output-contract")
        expectation = expectation_for(model, triton.settings.expectations, client.declared.data.get(model))
        batched = int(config.get("max_batch_size", 0)) > 0
        for case in expectation.cases:
            try:
                inputs = synthesize_inputs(metadata, config, dynamic_dim=client.dynamic_dim,
                                           shapes=client.input_shapes.get(model, {}), steps=[case.inputs])
            except InputDataError as exc:
                check.finding(f"{model}: {exc}", model=model, rule="input-data")
                continue
            answer = client.infer(model, inputs)
            problems = ([f"{case.where}: the request failed: {answer.error}"] if not answer.ok else
                        answer_mismatches(case, answer.outputs, metadata.get("outputs", []), batched))
            for problem in problems:
                check.finding(f"{model}: {problem}", model=model, rule="answer")
        check.judged_since(mark, "answer-matches-declared-outputs", measured="the answer to a real inference", model=model)
        if sequence:
            continue
        again = client.infer(model, outcome.inputs)
        if again.ok and not all(np.array_equal(outcome.outputs[n], again.outputs.get(n)) for n in outcome.outputs):
            check.finding(f"{model}: the same input gave different outputs on two requests",
                          severity="error" if expectation.deterministic else "warning", model=model, rule="determinism")


# -- CFG-1 (the lint), CFG-3 (version policy), CFG-4 (resource limits) ---------------------------
@pytest.mark.triton_check("CFG-1")
def test_model_configs_lint_clean(triton, triton_settings, gpu, check):
    """Every model config parses against Triton's ModelConfig message and breaks no lint rule of
    severity error (docs/config-rules.md); warnings are reported without failing."""
    from pytest_triton_ready.lint import UnknownRule, lint
    from pytest_triton_ready.lint.context import disabled_rules, lint_context
    from pytest_triton_ready.lint.model_memory import NotMeasured, measure_model_memory
    from pytest_triton_ready.lint.model_rules import has_gpu_instances
    from pytest_triton_ready.lint.sources import deployment_configs, repository_models

    found = deployment_configs(triton)
    mark = check.mark()
    check.evidence("configs linted", f"{found.where}: " + (", ".join(s.origin for s in found.sources) or "none"))
    for error in found.errors:
        check.finding(f"{error}", rule="config-syntax", value=error.origin)
    if not found.sources and not found.errors:
        check.incomplete(f"no model config found in {found.where}")

    context = lint_context(triton_settings, [s.name for s in found.sources])
    context.repository = repository_models(triton, found)
    context.repository_where = found.where if found.from_files else f"the repository index of {triton.endpoints.http_url}"
    readings = gpu.read()
    context.gpus = readings or None
    context.gpus_unknown_reason = f"no GPU reading ({gpu.unavailable_reason})"
    from pytest_triton_ready.plan import policy

    reload_refused = policy(triton_settings).refusal("reload", "measuring a model's GPU memory unloads and "
                                                               "reloads it")
    may_reload = triton_settings.section_model("lint").measures_model_memory and not reload_refused
    served = ready_names(triton.client)
    for source in (s for s in found.sources if has_gpu_instances(s.config, [g.index for g in readings])):
        if not readings:
            continue  # the rule says why it could not look
        if not may_reload:
            context.model_memory_unmeasured[source.name] = reload_refused or (
                "measuring a model's GPU memory unloads and reloads it: lint.measure_model_memory is false")
        elif source.name not in served:
            context.model_memory_unmeasured[source.name] = "the model is not loaded on the server"
        else:
            try:
                memory = measure_model_memory(triton.client, gpu, source.name)
            except NotMeasured as exc:
                context.model_memory_unmeasured[source.name] = f"its GPU memory was not measured: {exc}"
                continue
            context.model_memory_bytes[source.name] = memory
            check.measure("model GPU memory (unloaded vs loaded)", round(sum(memory.values()) / 1e9, 3), "GB",
                          model=source.name)

    try:
        findings = lint(found.sources, context, disabled_rules(triton_settings))
    except UnknownRule as exc:
        check.finding(f"{exc} (from {triton_settings.config_file})", rule="lint.disable")
        return
    for item in findings:
        check.finding(item.message, severity=item.severity, rule=item.rule, model=item.model, value=item.value)
    check.measure("models linted", len(found.sources), "models")
    check.judged_since(mark, "config-lint", measured=f"{len(found.sources)} model configs from {found.where}")
    for severity in ("error", "warning"):
        check.measure(f"lint {severity}s", sum(f.severity == severity for f in findings), "findings")
    if any(f.severity == "error" for f in findings) or found.errors:
        check.recommend("Fix each config.pbtxt named above; docs/config-rules.md explains every rule id, and "
                        "`lint: {disable: [id]}` in the YAML turns off a rule that does not fit the deployment.")


@pytest.mark.triton_check("CFG-3")
def test_version_policy_explicit_and_served(triton, triton_settings, check):
    """Every model writes its version_policy out, the server serves exactly the versions it selects,
    and a model under a declared canary or blue-green rollout has at least two versions servable."""
    from pytest_triton_ready.lint.sources import deployment_configs
    from pytest_triton_ready.lint.versions import describe_policy, expected_versions, servable_count

    found = deployment_configs(triton)
    mark = check.mark()
    rollouts = triton_settings.section_model("lint").rollout
    served: dict[str, list[int]] = {}
    for entry in triton.client.repository_index():
        if entry.get("state") == "READY" and str(entry.get("version", "")).isdigit():
            served.setdefault(entry["name"], []).append(int(entry["version"]))
    for error in found.errors:
        check.finding(f"{error} (its version policy cannot be read)", severity="warning", rule="config-syntax")
    if not found.sources:
        check.incomplete(f"no model config could be read from {found.where}")
    for source in found.sources:
        model, config = source.name, source.config
        policy = describe_policy(config)
        versions = sorted(served.get(model, []))
        check.measure("version_policy", policy, model=model)
        check.measure("versions served", ", ".join(map(str, versions)) or "none", model=model)
        if source.wrote("version_policy") is False:
            check.finding(f"{model}: version_policy is not written, so Triton's default (latest 1) decides which "
                          "versions serve; write the policy so a rollout or rollback is a reviewed change",
                          model=model, rule="CFG-3", value="version_policy left out")
        expected = expected_versions(config, source.versions_on_disk)
        if expected is not None and versions != expected:
            check.finding(f"{model}: the policy {policy} selects versions {expected} (on disk: "
                          f"{source.versions_on_disk or 'unknown'}) but the server serves {versions or 'none'}",
                          model=model, rule="CFG-3", value=versions)
        elif expected is None and len(versions) > (servable_count(config) or len(versions)):
            check.finding(f"{model}: the policy {policy} allows {servable_count(config)} version(s) at once but "
                          f"the server serves {versions}", model=model, rule="CFG-3", value=versions)
        if model in rollouts:
            check.measure("servable versions", len(versions), "versions", model=model, threshold=2, comparison=">=",
                          finding=f"{model}: a {rollouts[model]} rollout is declared but only {len(versions)} "
                                  f"version(s) serve ({versions or 'none'}); old and new must serve side by side")
    missing = sorted(set(rollouts) - {s.name for s in found.sources})
    for model in missing:
        check.finding(f"lint.rollout names {model}, which is not among the configs in {found.where}",
                      rule="CFG-3", model=model)
    check.judged_since(mark, "version-policy-served", measured=f"the policies of {len(found.sources)} configs "
                       "against the versions the server serves")
    if check.errors:
        check.recommend("Write version_policy in every config.pbtxt: specific { versions: [old, new] } during a "
                        "canary or blue-green rollout, latest { num_versions: 1 } otherwise.")
    elif not found.from_files:
        check.incomplete("the server's live config always carries a policy, so whether it is written out can only "
                         "be read from the files: pass --triton-model-repository")


def _gpu_models(triton) -> list[str]:
    from pytest_triton_ready.lint.model_rules import has_gpu_instances
    from pytest_triton_ready.lint.sources import deployment_configs

    return sorted(s.name for s in deployment_configs(triton).sources if has_gpu_instances(s.config))


@pytest.mark.triton_check("CFG-4")
def test_gpu_memory_headroom(triton, triton_settings, gpu, check):
    """With every model loaded, each GPU's memory use stays under gpu_memory_used_max_fraction (90%)."""
    from pytest_triton_ready.lint.resources import gpu_memory_use

    readings = gpu.read()
    if not readings:
        gpu_models = _gpu_models(triton)
        if not gpu_models:
            check.not_applicable(f"no model has KIND_GPU instances, and no GPU can be read ({gpu.unavailable_reason})")
        check.incomplete(f"{', '.join(gpu_models)} run KIND_GPU instances but no GPU can be read: {gpu.unavailable_reason}")
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
    from pytest_triton_ready.lint.resources import host_memory_use, polled_snapshot

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
    from pytest_triton_ready.lint.resources import pinned_pool_bytes, polled_snapshot

    pool = pinned_pool_bytes(polled_snapshot(triton_metrics))
    if pool is None:
        check.incomplete("the server exports no nv_pinned_memory_pool_total_bytes")
    if pool == 0 and not _gpu_models(triton):
        check.not_applicable("the pinned pool is 0 bytes, and it only speeds host-GPU copies: no model has "
                             "KIND_GPU instances (a server without CUDA allocates no pool)")
    if not check.measure("pinned memory pool", round(pool / 2**20, 1), "MiB", threshold=0, comparison=">",
                         finding="the pinned memory pool is 0 bytes, so host-device copies go through pageable "
                                 "memory and are slower"):
        check.recommend("Start tritonserver with --pinned-memory-pool-byte-size (default 268435456).")
