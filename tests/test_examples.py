"""The shipped example settings file is valid."""

from conftest import REPO_ROOT
from pytest_triton_ready.settings import build_settings


def test_example_settings_file_loads():
    settings = build_settings({}, {}, environ={}, config_file=str(REPO_ROOT / "examples" / "triton-ready.yaml"))
    assert settings.triton_url == "http://127.0.0.1:8000"
    assert settings.slo_for("scale").p99_ms == 25
    assert settings.input_shapes["scale"]["INPUT0"] == [16]
