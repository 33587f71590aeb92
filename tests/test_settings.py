"""Settings: precedence across sources, and usage errors that name the file, line and key."""

from __future__ import annotations

import json

import pytest

from pytest_triton_ready.settings import SettingsError, build_settings


def _settings(tmp_path, yaml_text=None, cli=None, env=None, ini=None, **kwargs):
    config = None
    if yaml_text is not None:
        config = tmp_path / "triton-ready.yaml"
        config.write_text(yaml_text)
    return build_settings(cli or {}, ini or {}, environ=env or {}, config_file=str(config) if config else None, **kwargs)


def test_precedence_is_cli_then_env_then_yaml_then_ini(tmp_path):
    yaml_text = "server:\n  http_url: http://yaml:8000\n  request_timeout_s: 3\n"
    ini = {"triton_url": "http://ini:8000", "triton_request_timeout": "7", "triton_dynamic_dim": "4"}
    env = {"TRITON_READY_URL": "http://env:8000"}
    settings = _settings(tmp_path, yaml_text, cli={"triton_url": "http://cli:8000"}, env=env, ini=ini)
    assert (settings.triton_url, settings.sources["triton_url"]) == ("http://cli:8000", "cli")
    assert settings.triton_request_timeout == 3.0
    assert settings.sources["triton_request_timeout"].startswith("yaml:")
    assert (settings.triton_dynamic_dim, settings.sources["triton_dynamic_dim"]) == (4, "ini")
    settings = _settings(tmp_path, yaml_text, env=env, ini=ini)
    assert (settings.triton_url, settings.sources["triton_url"]) == ("http://env:8000", "env:TRITON_READY_URL")
    assert (settings.launch, settings.triton_launch) == ("attach", None)  # a URL alone attaches


def test_grpc_and_metrics_urls_are_derived_from_the_http_url(tmp_path):
    from pytest_triton_ready.launchers.attach import AttachLauncher

    settings = _settings(tmp_path, cli={"triton_url": "http://triton.internal:8000"})
    endpoints = AttachLauncher(settings).endpoints
    assert endpoints.grpc_url == "triton.internal:8001"
    assert endpoints.metrics_url == "http://triton.internal:8002/metrics"


def test_unknown_yaml_key_names_file_line_and_key(tmp_path):
    with pytest.raises(SettingsError) as error:
        _settings(tmp_path, "server:\n  http_url: http://h:8000\n  requst_timeout_s: 5\n")
    message = str(error.value)
    assert "triton-ready.yaml:3" in message and "server.requst_timeout_s" in message
    assert "request_timeout_s" in message  # the known keys are listed


def test_wrong_yaml_type_names_file_line_and_key(tmp_path):
    with pytest.raises(SettingsError) as error:
        _settings(tmp_path, "slo:\n  scale:\n    p99_ms: fast\n")
    assert "triton-ready.yaml:3" in str(error.value)
    assert "slo.scale.p99_ms" in str(error.value) and "expected a number" in str(error.value)


def test_broken_yaml_syntax_is_reported_with_its_line(tmp_path):
    with pytest.raises(SettingsError, match=r"triton-ready.yaml:3: not valid YAML"):
        _settings(tmp_path, "server:\n  http_url: http://h:8000\n bad: indent\n")


def test_unknown_threshold_is_an_error_and_known_ones_keep_their_source(tmp_path):
    with pytest.raises(SettingsError, match="unknown threshold 'sucess_rate_min'"):
        _settings(tmp_path, "thresholds:\n  sucess_rate_min: 0.99\n")
    settings = _settings(tmp_path, "thresholds:\n  success_rate_min: 0.99\n",
                         cli_thresholds=["metrics_scrape_timeout_s=2"])
    assert settings.threshold("success_rate_min").value == 0.99
    assert settings.threshold("success_rate_min").source.startswith("yaml:")
    assert settings.threshold("metrics_scrape_timeout_s").source == "cli"
    assert settings.threshold("queue_p95_max_ms").source == "default"


def test_per_model_slo_falls_back_to_the_default(tmp_path):
    settings = _settings(tmp_path, "slo:\n  scale:\n    p99_ms: 20\n", cli={"triton_slo_min_throughput": "100"})
    assert settings.slo_for("scale").p99_ms == 20 and settings.slo_for("scale").min_throughput == 100
    assert settings.slo_for("other").p99_ms is None


def test_header_values_are_redacted(tmp_path):
    settings = _settings(tmp_path, "server:\n  headers:\n    X-Team: platform\n",
                         cli={"triton_url": "http://h:8000"}, cli_headers=["Authorization: Bearer s3cret-value"])
    assert settings.headers == {"X-Team": "platform", "Authorization": "Bearer s3cret-value"}
    shown = repr(settings.redacted())
    assert "s3cret" not in shown and "platform" not in shown
    assert settings.secrets() == ["Bearer s3cret-value", "s3cret-value", "platform"]  # longest first


def test_bad_value_names_the_option_and_its_source(tmp_path):
    with pytest.raises(SettingsError, match=r"--triton-request-timeout from env:TRITON_READY_REQUEST_TIMEOUT"):
        _settings(tmp_path, env={"TRITON_READY_REQUEST_TIMEOUT": "-1"})
    with pytest.raises(SettingsError, match=r"--triton-launch from cli: must be one of"):
        _settings(tmp_path, cli={"triton_launch": "kubernetes"})


def test_a_bad_yaml_file_is_a_pytest_usage_error(pytester, tmp_path):
    config = tmp_path / "triton-ready.yaml"
    config.write_text("sever:\n  http_url: http://h:8000\n")
    result = pytester.runpytest_subprocess(f"--triton-config={config}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*triton-ready: {config}:1: unknown key 'sever'*"])


def test_marker_threshold_outranks_the_command_line(pytester):
    pytester.makepyfile(test_marker="""
        import pytest

        @pytest.mark.triton_check("CFG-9", thresholds={"success_rate_min": 0.5})
        def test_marker_wins(check):
            limit = check.threshold("success_rate_min")
            assert (limit.value, limit.source) == (0.5, "marker")
            check.measure("success rate", 0.4, "ratio", threshold=limit, comparison=">=")

        @pytest.mark.triton_check("CFG-9")
        def test_cli_applies_without_marker(check):
            limit = check.threshold("success_rate_min")
            assert (limit.value, limit.source) == (0.3, "cli")
            check.measure("success rate", 0.4, "ratio", threshold=limit, comparison=">=")
    """)
    result = pytester.runpytest_subprocess("--triton-threshold=success_rate_min=0.3", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*CFG-9: success rate is 0.4 ratio, the rule is >= 0.5 ratio*"])
    report = json.loads((pytester.path / "triton-ready-report" / "readiness.json").read_text())
    failing = next(r for r in report["results"] if r["nodeid"].endswith("test_marker_wins"))
    assert failing["verdict"] == "fail"
    assert failing["measurements"][0]["threshold_source"] == "marker"
    assert report["verdict"] == "NOT READY"
