"""The plugin's public fixtures: `triton_settings`, `triton`, `triton_metrics`, `gpu`, `load`,
`faults`, `triton_facts`, `triton_run` and `check`. Everything heavy (the tritonclient stack, a
launched server) is created only when a check asks for it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from ..gate import EXIT_UNREACHABLE
from ..record.recorder import CheckRecorder
from .state import RECORDER_KEY, RUN_KEY


@pytest.fixture(scope="session")
def triton_settings(pytestconfig: pytest.Config):
    """The run's typed Settings (URLs, models in scope, SLOs, thresholds, YAML sections)."""
    return pytestconfig.stash[RUN_KEY].settings


@pytest.fixture(scope="session")
def triton(pytestconfig: pytest.Config) -> Iterator:
    """The server under test (a Target): `.client` speaks to it, `.models()` lists the models in
    scope, `.launcher` owns the process when the run launched it. An unreachable server fails
    every check that uses it with one line."""
    from ..launchers import LaunchError
    from ..server.client import TritonUnreachable
    from ..target import Target

    run = pytestconfig.stash[RUN_KEY]
    if not run.target_error:
        try:
            run.target = Target.open(run.settings)
        except (LaunchError, TritonUnreachable) as exc:
            run.target_error = str(exc)
            run.unreachable = True
    if run.target_error:  # no later check could run: stop here, with one line and its exit code
        pytest.exit(f"triton-ready: {run.target_error}", returncode=EXIT_UNREACHABLE)
    run.context = run.collect_context()
    try:
        yield run.target
    finally:
        run.context = run.collect_context()
        run.target.close()


@pytest.fixture
def triton_metrics(triton):
    """Scrapes the server's Prometheus endpoint: `triton_metrics()` returns a MetricsSnapshot."""
    return triton.scrape_metrics


@pytest.fixture(scope="session")
def gpu(triton):
    """Reads the server's GPUs (a GpuReader): NVML on the same host, else Triton's nv_gpu_* metrics.
    `gpu.read()` is empty with `gpu.unavailable_reason` set when neither works."""
    from ..server.gpu import GpuReader

    return GpuReader.for_target(triton)


@pytest.fixture(scope="session")
def load(triton, gpu):
    """The load engine (a LoadEngine) bound to the server under test; see docs/load-engine.md.

    - `load.open_loop(model | [models] | {model: rate}, rate, poisson=False, window_s=None,
      on_window=None, server_stats=False)` and `load.closed_loop(model, concurrency, ...)` return
      BackgroundTraffic: `with ... as traffic:` runs it in a background thread while the check
      does other things; `traffic.event("name")` marks the timeline; after the block
      `traffic.result` holds `.stats` (count_ok, errors by reason, dropped, p50..p99.9 ms,
      throughput_infer_s), `.timeline` (100 ms bins and events) and `.windows`.
    - `load.measure(model, concurrency=N | rate=R)` runs warm-up and measurement windows until
      stable and valid (thresholds `load_*`), with the server's statistics and GPU readings for
      the same windows: a Measurement with `.stats`, `.stable`, `.valid`, `.problem()`, `.server`.
    """
    from ..budget import guard_budget
    from ..load import LoadEngine
    from ..policy import guard_load

    engine = guard_load(LoadEngine.for_target(triton, gpu_reader=gpu), triton.settings)  # the attach load ceiling
    return guard_budget(engine, triton.settings)  # the run budget (--triton-budget)


@pytest.fixture(scope="session")
def faults(triton, load, triton_settings):
    """The fault injector (a FaultInjector) for the server under test; see docs/faults.md.

    Low-level faults: `faults.kill_stub(model)`, `faults.kill_server()` / `faults.start_server()`,
    `faults.terminate_server()` (SIGTERM), `faults.reload(model)` (a config override: a real
    reload), `faults.unload_and_load(model)`. Experiments under open-loop traffic, each returning
    an Outcome with a 100 ms timeline and its numbers: `forced_reload`, `version_rollout`,
    `instance_restart`, `server_restart`, `graceful_shutdown`. Destructive ones need a server the
    run owns (`faults.owns_process`; else `faults.destructive_unavailable()` says why) and leave
    it ready again before they return. Durations and rate: the YAML section `faults:`.
    """
    from ..faults import FaultInjector, FaultPlan

    try:
        plan = FaultPlan.from_section(triton_settings.section_model("faults"))
    except (TypeError, ValueError) as exc:
        where = triton_settings.config_file or "the settings"
        pytest.fail(f"faults settings in {where}: {exc}", pytrace=False)
    return FaultInjector(triton, load, plan, triton_settings.threshold("success_rate_min").value)


@pytest.fixture(scope="session")
def triton_facts(pytestconfig: pytest.Config):
    """The run's typed facts (facts.Facts): results one check leaves for a later one in the same
    run, e.g. PERF-2's highest throughput within SLO per model (`Capacity`), which OPS-2 and the
    soak use. A check publishes a fact (`triton_facts.publish(...)`) and asks for another's by type
    (`get(Kind, model)`, or `require`, which ends the check INCOMPLETE naming the producing check
    when it is missing). Checks run in phase order."""
    return pytestconfig.stash[RUN_KEY].facts


@pytest.fixture(scope="session")
def triton_run(pytestconfig: pytest.Config):
    """The run so far (a Run): its settings, the Results earlier checks recorded, the context the
    report will show. SEC-4 searches these for leaked secrets; checks do not change them."""
    return pytestconfig.stash[RUN_KEY]


@pytest.fixture
def check(request: pytest.FixtureRequest) -> CheckRecorder:
    """The record of the running check: `threshold`, `measure`, `judge`, `judged_since`, `setting`,
    `finding`, `recommend`, `evidence`, `chart`, `not_applicable`, `incomplete`. A missed threshold
    or an error finding fails the check; a check that judged no rule on data measured in this run
    is INCOMPLETE (record/recorder.py)."""
    recorder = request.node.stash.get(RECORDER_KEY, None)
    if recorder is None:
        pytest.fail("the `check` fixture needs a @pytest.mark.triton_check(...) marker", pytrace=False)
    return recorder
