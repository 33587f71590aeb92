"""Settings validation: a bad value is a usage error with one line naming the setting and where it
came from (cli, the environment variable, FILE:LINE of the YAML file, the ini key). No server."""

from __future__ import annotations

import pytest

from pytest_triton_ready.faults.schema import FaultPlan
from pytest_triton_ready.settings import SettingsError, build_settings
from pytest_triton_ready.thresholds import THRESHOLDS, threshold_problem


def _error(tmp_path, yaml_text=None, cli=None, env=None, ini=None, **kwargs) -> str:
    config = None
    if yaml_text is not None:
        config = tmp_path / "triton-ready.yaml"
        config.write_text(yaml_text)
    with pytest.raises(SettingsError) as error:
        build_settings(cli or {}, ini or {}, environ=env or {}, config_file=str(config) if config else None, **kwargs)
    message = str(error.value)
    assert "\n" not in message
    return message


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "NaN"])
def test_non_finite_request_timeout_names_its_source(tmp_path, value):
    assert _error(tmp_path, cli={"triton_request_timeout": value}).startswith(
        "--triton-request-timeout from cli: must be a finite number")
    assert _error(tmp_path, env={"TRITON_READY_STARTUP_TIMEOUT": value}).startswith(
        "--triton-startup-timeout from env:TRITON_READY_STARTUP_TIMEOUT: must be a finite number")


@pytest.mark.parametrize(("yaml_text", "expected"), [
    ("server:\n  request_timeout_s: .nan\n", "triton-ready.yaml:2: key 'server.request_timeout_s': expected a finite number, got nan"),
    ("server:\n  request_timeout_s: 0\n", "triton-ready.yaml:2: key 'server.request_timeout_s': must be positive, got 0"),
    ("server:\n  startup_timeout_s: -1\n", "triton-ready.yaml:2: key 'server.startup_timeout_s': must be positive"),
    ("inputs:\n  dynamic_dim: 0\n", "triton-ready.yaml:2: key 'inputs.dynamic_dim': must be a whole number >= 1, got 0"),
    ("inputs:\n  shapes: {scale: {INPUT0: [16, -1]}}\n", "key 'inputs.shapes.scale.INPUT0[1]': must be a whole number >= 1"),
    ("slo:\n  default: {p99_ms: -5}\n", "triton-ready.yaml:2: key 'slo.default.p99_ms': must be positive"),
    ("slo:\n  scale:\n    min_throughput: .inf\n", "triton-ready.yaml:3: key 'slo.scale.min_throughput': expected a finite number"),
    ("faults:\n  steady_s: 0\n", "triton-ready.yaml:2: key 'faults.steady_s': must be greater than 0, got 0"),
    ("faults:\n  protocol: udp\n", "triton-ready.yaml:2: key 'faults.protocol': must be 'grpc' or 'http', got 'udp'"),
    ("soak:\n  rate: 0\n", "triton-ready.yaml:2: key 'soak.rate': must be greater than 0"),
    ("soak:\n  rates: {scale: -1}\n", "triton-ready.yaml:2: key 'soak.rates.scale': must be greater than 0"),
    ("soak:\n  success_rate_min: 5\n", "key 'soak.success_rate_min': must be less than or equal to 1, got 5"),
    ("soak:\n  window: soon\n", "triton-ready.yaml:2: key 'soak.window': expected a duration like 90s"),
    ("soak:\n  duration: .inf\n", "key 'soak.duration'"),
    ("operations:\n  capacity:\n    fleet: {gpus: 0}\n",
     "triton-ready.yaml:3: key 'operations.capacity.fleet.gpus': must be greater than or equal to 1"),
    ("performance:\n  tune_queue_delays_us: [100, -5]\n", "key 'performance.tune_queue_delays_us[1]': must be greater than or equal to 0"),
    ("lint:\n  rollout: {scale: rolling}\n",
     "triton-ready.yaml:2: key 'lint.rollout.scale': expected one of canary, blue-green, got 'rolling'"),
])
def test_an_out_of_range_yaml_value_names_file_line_and_key(tmp_path, yaml_text, expected):
    assert expected in _error(tmp_path, yaml_text)


@pytest.mark.parametrize(("name", "value", "expected"), [
    ("success_rate_min", 5, "success_rate_min must be in [0, 1], got 5"),
    ("success_rate_min", -0.1, "must be in [0, 1], got -0.1"),
    ("gpu_utilization_max", 1.5, "must be in [0, 1]"),
    ("soak_rate_fraction", 0, "must be in (0, 1], got 0"),
    ("load_window_s", 0, "must be > 0, got 0"),
    ("reload_serve_max_s", float("nan"), "must be a finite number, got nan"),
    ("load_max_windows", 2.5, "must be a whole number, got 2.5"),
    ("perf_target_concurrency", 0, "must be >= 1, got 0"),
    ("capacity_headroom", -1, "must be >= 0"),
])
def test_every_threshold_has_a_range(name, value, expected):
    assert expected in threshold_problem(name, value)


def test_every_threshold_default_is_inside_its_own_range():
    for name, spec in THRESHOLDS.items():
        assert threshold_problem(name, spec.default) is None, name


def test_an_out_of_range_threshold_names_its_source(tmp_path):
    assert _error(tmp_path, cli_thresholds=["success_rate_min=5"]) == (
        "--triton-threshold success_rate_min=5 from cli: success_rate_min must be in [0, 1], got 5")
    assert _error(tmp_path, cli_thresholds=["load_window_s=nan"]).endswith("must be a finite number, got nan")
    assert _error(tmp_path, "\nthresholds:\n  success_rate_min: 5\n") == (
        f"{tmp_path / 'triton-ready.yaml'}:3: key 'thresholds.success_rate_min': must be in [0, 1], got 5")
    assert "expected a finite number, got inf" in _error(tmp_path, "thresholds:\n  queue_p95_max_ms: .inf\n")


def test_contradicting_thresholds_are_an_error(tmp_path):
    message = _error(tmp_path, "thresholds:\n  gpu_utilization_min: 0.9\n")
    assert "gpu_utilization_min (0.9) is above gpu_utilization_max (0.85)" in message
    assert "gpu_utilization_min from yaml:" in message


@pytest.mark.parametrize("url", ["ftp://h:8000", "http://", "http://h:0", "http://h:99999", "http://h:port",
                                 "http://user@:8000", "http://h:8000?x=1", "http://bad host:8000"])
def test_a_malformed_http_url_is_an_error(tmp_path, url):
    assert _error(tmp_path, cli={"triton_url": url}).startswith(
        "--triton-url from cli: expected an http(s)://host[:port] URL")
    assert "--triton-metrics-url from env:TRITON_READY_METRICS_URL: expected an http(s)://host[:port] URL" in \
        _error(tmp_path, cli={"triton_url": "http://h:8000"}, env={"TRITON_READY_METRICS_URL": url})


@pytest.mark.parametrize("url", ["http://h:8000", "https://triton.internal", "h:8000", "10.0.0.5:8000",
                                 "http://[::1]:8000", "https://h:8443/prefix", "https://ops:long-secret@h:8443"])
def test_good_http_urls_are_accepted(tmp_path, url):
    settings = build_settings({"triton_url": url}, {}, environ={})
    assert settings.triton_url.startswith(("http://", "https://")) and "long-secret" not in settings.triton_url


@pytest.mark.parametrize("address", ["h", "grpc://h:8001", "h:8001/x", "h:0", ":8001", "h:grpc"])
def test_a_malformed_grpc_address_is_an_error(tmp_path, address):
    assert _error(tmp_path, ini={"triton_grpc_url": address}).startswith(
        "--triton-grpc-url from ini: expected a gRPC host:port")


def test_a_malformed_url_in_yaml_names_the_line(tmp_path):
    message = _error(tmp_path, "server:\n  launch: attach\n  grpc_url: h\n")
    assert message.endswith("triton-ready.yaml:3: key 'server.grpc_url': expected a gRPC host:port (with a port), got 'h'")


def test_a_url_with_a_launcher_is_a_conflict_naming_both_sources(tmp_path):
    message = _error(tmp_path, cli={"triton_url": "http://h:8000"}, env={"TRITON_READY_LAUNCH": "embedded"})
    assert message == ("--triton-url from cli conflicts with --triton-launch=embedded from env TRITON_READY_LAUNCH: "
                       "a launched server has its own URL; drop one of them")
    message = _error(tmp_path, "server:\n  launch: container\n  http_url: http://h:8000\n")
    assert "--triton-url from " in message and "triton-ready.yaml:3 (server.http_url)" in message
    assert "--triton-launch=container from " in message and "triton-ready.yaml:2 (server.launch)" in message
    message = _error(tmp_path, env={"TRITON_READY_URL": "http://h:8000"}, ini={"triton_launch": "embedded"})
    assert "from env TRITON_READY_URL" in message and "from ini triton_launch" in message


def test_a_launcher_from_a_stronger_source_overrides_a_configured_url(tmp_path):
    config = tmp_path / "triton-ready.yaml"
    config.write_text("server:\n  http_url: http://prod:8000\n")
    settings = build_settings({"triton_launch": "embedded"}, {}, environ={}, config_file=str(config))
    assert settings.launch == "embedded"


@pytest.mark.parametrize(("cli", "expected"), [
    ({"triton_slo_p99_ms": "0"}, "--triton-slo-p99-ms from cli: must be positive"),
    ({"triton_slo_min_throughput": "-1"}, "--triton-slo-min-throughput from cli: must be positive"),
    ({"triton_dynamic_dim": "2.5"}, "--triton-dynamic-dim from cli: must be a whole number >= 1"),
    ({"triton_soak": "inf"}, "--triton-soak from cli: expected a duration"),
    ({"triton_tune_batching": "maybe"}, "--triton-tune-batching from cli: must be true or false"),
    ({"triton_progress_after": "-1"}, "--triton-progress-after from cli: must be 0 or more"),
])
def test_bad_option_values_name_the_option_and_source(tmp_path, cli, expected):
    assert _error(tmp_path, cli=cli).startswith(expected)


def test_a_bad_setting_is_a_pytest_usage_error_exit_code_4(pytester):
    result = pytester.runpytest_subprocess("--triton-request-timeout=nan", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR == 4
    result.stderr.fnmatch_lines(["*triton-ready: --triton-request-timeout from cli: must be a finite number, got nan*"])


def test_fault_plan_from_a_plain_dict_names_the_key():
    with pytest.raises(ValueError, match=r"key 'faults.rate_per_s': must be greater than 0, got -5"):
        FaultPlan.from_section({"rate_per_s": -5})
    plan = FaultPlan.from_section({"rate_per_s": 7})
    assert plan.rate_per_s == 7.0 and plan.steady_s == 1.5 and plan.late_drop_s == 1.0


def _from_yaml(tmp_path, text):
    path = tmp_path / "triton-ready.yaml"
    path.write_text(text)
    return build_settings({}, {}, {}, config_file=str(path))


def test_the_container_launcher_reads_its_own_section(tmp_path, recwarn):
    settings = _from_yaml(tmp_path, "container:\n  image: tritonserver:24.10-py3\n  shm_size: 2g\n"
                                    "  ulimits: {memlock: 65536}\n")
    assert (settings.triton_image, settings.triton_shm_size, settings.triton_ulimits) == (
        "tritonserver:24.10-py3", "2g", "memlock=65536")
    assert settings.origins["triton_image"].endswith("triton-ready.yaml:2 (container.image)")
    assert not [w for w in recwarn if issubclass(w.category, FutureWarning)]


def test_a_container_key_under_server_is_still_read_with_one_deprecation_line(tmp_path):
    with pytest.warns(FutureWarning) as caught:
        settings = _from_yaml(tmp_path, "server:\n  image: old:1\n  gpus: none\n")
    assert (settings.triton_image, settings.triton_gpus) == ("old:1", "none")
    assert settings.origins["triton_image"].endswith("triton-ready.yaml:2 (server.image)")
    lines = sorted(str(w.message) for w in caught)
    assert len(lines) == 2 and lines[0].endswith("triton-ready.yaml:2: server.image is deprecated, write "
                                                 "container.image (the container launcher's own section)")


def test_the_new_spelling_wins_over_the_old_and_the_line_says_so(tmp_path):
    with pytest.warns(FutureWarning, match="server.image is deprecated.*ignored, since container.image is set"):
        settings = _from_yaml(tmp_path, "server:\n  image: old:1\ncontainer:\n  image: new:2\n")
    assert settings.triton_image == "new:2"


def test_a_bad_container_value_names_its_key(tmp_path):
    with pytest.raises(SettingsError, match=r"container\.ulimits"):
        _from_yaml(tmp_path, "container:\n  ulimits: stak=1\n")
