"""The Launcher protocol without a server: every launcher implements it and declares what it can
do; the registry maps `server.launch` to a factory; `server.args` reaches every launched server."""

from __future__ import annotations

import dataclasses
import inspect

import pytest

from pytest_triton_ready.launchers import ACTION_CLASSES, Launcher, LauncherCapabilities, LaunchError, Unsupported
from pytest_triton_ready.launchers.attach import AttachLauncher
from pytest_triton_ready.launchers.container import ContainerLauncher
from pytest_triton_ready.launchers.container_spec import container_spec, server_command
from pytest_triton_ready.launchers.embedded import EmbeddedLauncher
from pytest_triton_ready.settings import build_settings
from pytest_triton_ready.target import LAUNCHERS, make_launcher

IMAGE = "nvcr.io/nvidia/tritonserver:24.10-py3"
PROTOCOL_MEMBERS = [name for name in dir(Launcher) if not name.startswith("_")] + list(
    Launcher.__annotations__)


def settings_from(cli=None, yaml_text=None, tmp_path=None):
    config_file = None
    if yaml_text is not None:
        config_file = tmp_path / "triton-ready.yaml"
        config_file.write_text(yaml_text)
    return build_settings(dict(cli or {}), {}, {}, config_file=str(config_file) if config_file else None)


@pytest.fixture
def launchers(tmp_path):
    made = [AttachLauncher(settings_from({"triton_url": "http://10.0.0.5:8000"})),
            EmbeddedLauncher(),
            ContainerLauncher(settings_from({"triton_image": IMAGE, "triton_gpus": "none"}))]
    yield {launcher.name: launcher for launcher in made}
    for launcher in made:
        launcher.cleanup()


def test_every_launcher_implements_the_protocol(launchers):
    assert set(launchers) == set(LAUNCHERS) == {"attach", "embedded", "container"}
    for name, launcher in launchers.items():
        assert isinstance(launcher, Launcher), name
        for member in PROTOCOL_MEMBERS:
            assert hasattr(launcher, member), f"{name} lacks {member}"
            protocol_member = getattr(Launcher, member, None)
            if inspect.isfunction(protocol_member):  # same parameters as the protocol's method
                expected = list(inspect.signature(protocol_member).parameters)[1:]
                got = list(inspect.signature(getattr(launcher, member)).parameters)
                assert got == expected, f"{name}.{member}{got} != {expected}"


def test_capabilities_are_declared_frozen_and_complete(launchers):
    caps = {name: launcher.capabilities for name, launcher in launchers.items()}
    assert all(type(c) is LauncherCapabilities for c in caps.values())
    with pytest.raises(dataclasses.FrozenInstanceError):
        caps["embedded"].owns_process = False
    assert caps["attach"] == LauncherCapabilities(False, False, False, False, False, False)
    assert caps["embedded"] == LauncherCapabilities(True, True, True, True, True, True)
    container = caps["container"]
    assert container.owns_process and container.can_signal_instance and container.can_restart
    assert not container.can_see_processes and not container.can_start_scratch
    # Declared on the class where it does not depend on the host, so nothing has to be started to know.
    assert AttachLauncher.capabilities.owns_process is False
    assert EmbeddedLauncher.capabilities.can_restart is True


def test_what_attach_cannot_do_raises_unsupported_with_the_reason(launchers):
    attach = launchers["attach"]
    for action in (attach.kill, attach.restart, attach.terminate, lambda: attach.signal_process(1, 9),
                   lambda: attach.scratch("/tmp")):
        with pytest.raises(Unsupported, match=r"attached \(http://10.0.0.5:8000\), not owned by this run"):
            action()
    assert attach.stubs("scale") == [] and attach.process_tree() is None and attach.exit_code() is None
    assert attach.failed_models == {}


def test_container_cannot_start_a_scratch_server(launchers):
    with pytest.raises(Unsupported):
        launchers["container"].scratch("/tmp")
    assert launchers["container"].process_tree() is None


def test_registry_builds_each_launcher_and_names_the_known_ones(tmp_path):
    launcher = make_launcher(settings_from({"triton_url": "http://h:8000"}))
    assert type(launcher) is AttachLauncher
    settings = type("Settings", (), {"launch": "kubernetes"})()
    with pytest.raises(LaunchError, match="unknown launcher 'kubernetes'; known: attach, embedded, container"):
        make_launcher(settings)


def test_server_args_reach_the_embedded_and_the_container_command(tmp_path):
    yaml_text = "server:\n  args: ['--log-format=ISO8601', '--model-load-thread-count=2']\n"
    settings = settings_from({"triton_launch": "embedded"}, yaml_text, tmp_path)
    embedded = make_launcher(settings)
    try:
        assert embedded.command()[-2:] == ["--log-format=ISO8601", "--model-load-thread-count=2"]
    finally:
        embedded.cleanup()
    settings = settings_from({"triton_launch": "container", "triton_image": IMAGE}, yaml_text, tmp_path)
    spec = container_spec(settings, host_ports={8000: 1, 8001: 2, 8002: 3})
    assert spec.command[-2:] == ("--log-format=ISO8601", "--model-load-thread-count=2")
    container = make_launcher(settings)
    try:
        assert container.spec.command[-2:] == ("--log-format=ISO8601", "--model-load-thread-count=2")
    finally:
        container.cleanup()
    assert server_command()[-1] == "--metrics-port=8002"  # no server.args: nothing appended


def test_what_a_run_may_do_follows_the_capabilities_not_the_launcher_name(monkeypatch):
    """A launcher that does not own the process (a port-forward to production, say) gets nothing
    without attach.allow, whatever it is called; an owner may be granted less than everything."""
    from pytest_triton_ready import policy as policy_module

    settings = settings_from({"triton_url": "http://10.0.0.5:8000", "triton_launch": "attach"})
    reaches_only = LauncherCapabilities(False, False, False, False)
    monkeypatch.setattr(policy_module, "declared_capabilities", lambda _settings: reaches_only)
    rules = policy_module.policy(settings)
    assert rules.attached and not any(rules.allows(kind) for kind in policy_module.ALLOW_CLASSES)
    assert rules.ceiling_applies and "--triton-allow=reload" in rules.refusal("reload", "reload a model")

    owns_but_no_saturation = LauncherCapabilities(True, True, True, True, may=frozenset({"reload", "faults"}))
    monkeypatch.setattr(policy_module, "declared_capabilities", lambda _settings: owns_but_no_saturation)
    rules = policy_module.policy(settings)
    assert not rules.attached and rules.allows("reload") and not rules.allows("saturate")
    assert rules.ceiling_applies


def test_capabilities_grant_every_action_to_an_owner_and_none_otherwise():
    assert tuple(plan_classes()) == ACTION_CLASSES
    assert LauncherCapabilities(True, False, False, False).may == frozenset(ACTION_CLASSES)
    assert LauncherCapabilities(False, False, False, False).may == frozenset()
    with pytest.raises(ValueError, match="unknown action class kill"):
        LauncherCapabilities(True, False, False, False, may=frozenset({"kill"}))


def plan_classes():
    from pytest_triton_ready.policy import ALLOW_CLASSES

    return ALLOW_CLASSES


def test_launchers_are_listed_once_and_declare_capabilities_on_the_class(launchers):
    from pytest_triton_ready.launchers.registry import LAUNCHER_KINDS, LAUNCHER_NAMES
    from pytest_triton_ready.settings.options import LAUNCHERS as SETTINGS_LAUNCHERS

    assert SETTINGS_LAUNCHERS == LAUNCHER_NAMES == tuple(LAUNCHERS) == tuple(LAUNCHER_KINDS)
    for name, launcher in launchers.items():
        declared = LAUNCHER_KINDS[name].capabilities
        assert dataclasses.replace(launcher.capabilities, can_read_process_memory=False) == \
            dataclasses.replace(declared, can_read_process_memory=False), name


def test_the_repository_served_and_the_container_memory_are_protocol_members(launchers, tmp_path):
    assert launchers["attach"].model_repository is None
    assert launchers["embedded"].model_repository.is_dir()
    assert launchers["container"].model_repository.is_dir()
    for name in ("attach", "embedded"):
        memory, why = launchers[name].memory_usage()
        assert memory is None and why.startswith("server memory: "), name
    memory, why = launchers["container"].memory_usage()  # not started
    assert memory is None and "not running" in why
