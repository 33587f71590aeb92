"""Reading why a model never loaded from a real tritonserver 2.51 log (captured here)."""

from pathlib import Path

from pytest_triton_ready.server_log import model_load_failures

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
