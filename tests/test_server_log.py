"""Reading why a model never loaded from a real tritonserver 2.51 log (captured here)."""

from pathlib import Path

from pytest_triton_ready.server.log import model_load_failures

LOG = Path(__file__).resolve().parent / "data" / "server-logs" / "broken-configs.log"


def test_parse_errors_carry_file_line_and_column():
    failures = model_load_failures(LOG.read_text())
    assert failures["unknown_field"] == ('/tmp/broken/unknown_field/config.pbtxt:16:12: Message type '
                                         '"inference.ModelConfig" has no field named "bogus_field".')
    assert failures["syntax"] == "/tmp/broken/syntax/config.pbtxt:17:1: Expected identifier, got:"


def test_validation_errors_keep_the_servers_words():
    failures = model_load_failures(LOG.read_text())
    assert failures["good"] == "unexpected directory name 'good' for model 'scale', directory name must equal model name"
    assert set(failures) == {"good", "syntax", "unknown_field"}


def test_a_clean_log_has_no_failures():
    assert model_load_failures('I1130 server.cc:674] "Started HTTPService at 127.0.0.1:8000"\n') == {}


CPU_ONLY_START = (
    'W1201 20:24:03.063979 9111 pinned_memory_manager.cc:273] "Unable to allocate pinned system memory, pinned memory '
    'pool will not be available: CUDA driver version is insufficient for CUDA runtime version"\n'
    'E1201 20:24:03.064117 9111 server.cc:241] "CudaDriverHelper has not been initialized."\n'
    'W1201 20:24:04.595064 9111 pinned_memory_manager.cc:170] "failed to allocate pinned system memory: no pinned '
    'memory pool, falling back to non-pinned system memory"\n'
    "Error: Failed to initialize NVML\n"
    'W1201 20:24:04.596489 9111 metrics.cc:798] "DCGM unable to start: DCGM initialization error"\n'
)


def test_a_cpu_only_machines_start_up_warnings_are_summed_up_once_and_left_out_of_excerpts():
    from types import SimpleNamespace

    import pytest

    from pytest_triton_ready.plugin.results import cpu_only_note, severe_log_lines

    crash = 'E1201 20:33:34.274858 30527 model.cc:3] "stub crashed"'
    restarted = CPU_ONLY_START + crash + "\n" + CPU_ONLY_START.replace("9111", "30527")  # a restart says it again
    assert severe_log_lines(restarted, set()) == [crash]
    config = SimpleNamespace(stash=pytest.Stash())
    assert cpu_only_note(restarted, config) == (
        "this machine has no usable GPU, so tritonserver warns at every start (DCGM unable to start, NVML not "
        "initialized, no CUDA driver, no pinned memory pool); those lines are left out of every excerpt")
    assert cpu_only_note(restarted, config) is None  # once per run
    assert cpu_only_note(crash, SimpleNamespace(stash=pytest.Stash())) is None  # a GPU machine: nothing to say
