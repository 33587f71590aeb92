"""Secrets: where header values come from, URL credentials, and the redactor every output uses."""

from __future__ import annotations

import pytest

from pytest_triton_ready.redaction import REDACTED, RedactingStream, Redactor, split_credentials
from pytest_triton_ready.settings import SettingsError, build_settings

TOKEN = "tok-3c1f9e7a"


def _settings(tmp_path, yaml_text: str = "", environ: dict[str, str] | None = None, **cli_lists):
    config = None
    if yaml_text:
        config = tmp_path / "triton-ready.yaml"
        config.write_text(yaml_text)
    return build_settings({"triton_url": "http://127.0.0.1:8000"}, {}, environ or {}, config_file=config and str(config),
                          **cli_lists)


def test_yaml_headers_expand_variables_from_the_environment(tmp_path):
    settings = _settings(tmp_path, "server:\n  headers: {Authorization: \"Bearer ${TOKEN}\"}\n", {"TOKEN": TOKEN})
    assert settings.headers == {"Authorization": f"Bearer {TOKEN}"}
    assert TOKEN in settings.secrets() and f"Bearer {TOKEN}" in settings.secrets()


def test_an_unset_variable_names_the_file_line_and_key(tmp_path):
    with pytest.raises(SettingsError, match=r"triton-ready.yaml:2 \(server.headers.Authorization\): \$\{TOKEN\} is not "
                                            r"set in the environment"):
        _settings(tmp_path, "server:\n  headers: {Authorization: \"Bearer ${TOKEN}\"}\n")


def test_headers_from_an_environment_variable_and_a_file(tmp_path):
    secret_file = tmp_path / "key"
    secret_file.write_text("file-secret-123\n")
    settings = _settings(tmp_path, environ={"API_KEY": "env-secret-456"}, cli_header_env=["X-Api-Key=API_KEY"],
                         cli_header_files=[f"X-Other={secret_file}"], cli_headers=["X-Third: ${API_KEY}"])
    assert settings.headers == {"X-Api-Key": "env-secret-456", "X-Other": "file-secret-123", "X-Third": "env-secret-456"}
    with pytest.raises(SettingsError, match="--triton-header-env from cli: environment variable NOPE"):
        _settings(tmp_path, cli_header_env=["X=NOPE"])
    with pytest.raises(SettingsError, match="cannot read the value of header X from"):
        _settings(tmp_path, cli_header_files=[f"X={tmp_path / 'missing'}"])


def test_a_value_too_short_to_redact_is_refused_in_one_line(tmp_path):
    with pytest.raises(SettingsError, match="header X-Env: its value is shorter than 6 characters"):
        _settings(tmp_path, cli_headers=["X-Env: 1"])


def test_url_credentials_become_a_header_and_secrets():
    plain, authorization, secrets = split_credentials("https://ops:pa%40ss-word9@triton.example:8000/")
    assert plain == "https://triton.example:8000/"
    assert authorization == "Basic b3BzOnBhQHNzLXdvcmQ5"
    assert {"ops:pa@ss-word9", "ops:pa%40ss-word9", "pa@ss-word9"} <= set(secrets)
    assert split_credentials("http://host:8000") == ("http://host:8000", None, [])


def test_settings_strip_url_credentials(tmp_path):
    settings = build_settings({"triton_url": "http://user:hunter2-long@127.0.0.1:8000"}, {}, {})
    assert settings.triton_url == "http://127.0.0.1:8000"
    assert settings.headers["Authorization"].startswith("Basic ")
    assert "hunter2-long" in settings.secrets() and "user:hunter2-long" in settings.secrets()
    assert "hunter2" not in str(settings.redacted())


def test_redactor_covers_json_html_and_longest_first():
    redactor = Redactor(['s3cr"et<99', "s3cr"])
    assert redactor.text('a s3cr"et<99 b') == f"a {REDACTED} b"
    assert redactor.text("a s3cr&quot;et&lt;99 b") == f"a {REDACTED} b"  # as XML/HTML writes it
    assert redactor.text('"s3cr\\"et<99"') == f'"{REDACTED}"'  # as JSON writes it
    assert redactor.value({"k": ["x s3cr y", 3]}) == {"k": [f"x {REDACTED} y", 3]}


def test_redacting_stream_and_file(tmp_path):
    import io

    buffer = io.StringIO()
    stream = RedactingStream(buffer, Redactor([TOKEN]))
    stream.write(f"E   AssertionError: header={TOKEN}\n")
    assert buffer.getvalue() == f"E   AssertionError: header={REDACTED}\n"
    path = tmp_path / "junit.xml"
    path.write_text(f"<property value='{TOKEN}'/>")
    Redactor([TOKEN]).file(path)
    assert path.read_text() == f"<property value='{REDACTED}'/>"


def test_a_secret_shortened_in_an_assertion_message_is_masked_too():
    """pytest shortens a long value in a failed assertion to head...tail: the full value never
    appears, but its first and last characters did, on the terminal and in the JUnit XML."""
    from _pytest._io.saferepr import saferepr

    secret = "env-50640c9c7a1e4f6b9d2e8a3c5f7b1d0e76edc15b9cbf"
    shortened = f"AssertionError: assert {saferepr(secret, maxsize=30)} == 'something else'"
    assert secret not in shortened and "..." in shortened
    masked = Redactor([secret]).text(shortened)
    assert masked == "AssertionError: assert '***' == 'something else'"
    assert secret[:6] not in masked and secret[-6:] not in masked
    untouched = "loading... done; see docs/... for more"
    assert Redactor([secret]).text(untouched) == untouched
