"""Every YAML key the code reads is declared in its section's model, and the docs tables are the
models' own: no server needed."""

from __future__ import annotations

import re
import typing
from pathlib import Path

import pytest

from pytest_triton_ready.settings import OPTIONS, build_settings, file_model, sections, settings_reference
from pytest_triton_ready.soak.plan import LIMIT_NAMES, SoakSection
from pytest_triton_ready.thresholds import THRESHOLDS
from pytest_triton_ready.yamlschema import UndeclaredKey, is_section, unwrap

ROOT = Path(__file__).resolve().parent.parent
SOURCES = sorted([*(ROOT / "pytest_triton_ready").rglob("*.py"), *(ROOT / "checks").glob("*.py")])

SECTION_CALL = re.compile(r'\.section\("(\w+)"\)')
SECTION_MODEL_ATTR = re.compile(r'\.section_model\("(\w+)"\)\.(\w+)')
ASSIGN_SECTION = re.compile(r'(\w+) = [\w.]+\.section\("(\w+)"\)((?:\.get\("\w+"\)(?: or \{\})?)*)')
ASSIGN_FROM_VAR = re.compile(r'(\w+) = (\w+)\.get\("(\w+)"\)')
CHAINED_GET = re.compile(r'\.get\("(\w+)"')


def _model_at(path: tuple[str, ...]):
    """The section model at a dotted path (section, key, key...), or None for a free-key map."""
    model = sections()[path[0]]
    for key in path[1:]:
        annotation = unwrap(model.model_fields[key].annotation)
        if not is_section(annotation):
            return None
        model = unwrap(annotation)
    return model


def _reads() -> list[tuple[str, int, tuple[str, ...], str]]:
    """(file, line, section path, key) for every key read from a settings section in the source."""
    reads = []
    for source in SOURCES:
        paths: dict[str, tuple[str, ...]] = {}
        for number, line in enumerate(source.read_text().splitlines(), 1):
            where = str(source.relative_to(ROOT))
            for match in ASSIGN_SECTION.finditer(line):
                var, name, chain = match.groups()
                path = (name, *CHAINED_GET.findall(chain))
                for depth in range(1, len(path)):
                    reads.append((where, number, path[:depth], path[depth]))
                paths[var] = path
            for match in ASSIGN_FROM_VAR.finditer(line):
                var, parent, key = match.groups()
                if parent in paths:
                    reads.append((where, number, paths[parent], key))
                    paths[var] = (*paths[parent], key)
            for match in re.finditer(r'\.section\("(\w+)"\)((?:\.get\("\w+"[^)]*\)(?: or \{\})?)+)', line):
                name, chain = match.groups()
                path = (name, *CHAINED_GET.findall(chain))
                for depth in range(1, len(path)):
                    reads.append((where, number, path[:depth], path[depth]))
            for var, path in paths.items():
                for pattern in (rf'\b{var}\.get\("(\w+)"', rf'\b{var}\["(\w+)"\]', rf'"(\w+)" in {var}\b'):
                    for key in re.findall(pattern, line):
                        reads.append((where, number, path, key))
            for name, attr in SECTION_MODEL_ATTR.findall(line):
                reads.append((where, number, (name,), attr))
            for name in SECTION_CALL.findall(line):
                reads.append((where, number, (name,), ""))
    return reads


def test_the_scan_finds_the_reads_it_is_meant_to_find():
    found = {(f, p, k) for f, _, p, k in _reads()}
    assert ("checks/test_config.py", ("lint",), "measure_model_memory") in found
    assert ("checks/test_operations.py", ("operations", "capacity"), "peak_rate") in found
    assert ("checks/test_operations.py", ("operations", "capacity", "fleet"), "placement") in found
    assert ("checks/test_security.py", ("security",), "restricted_apis") in found
    assert ("pytest_triton_ready/launchers/embedded.py", ("server",), "args") in found
    assert len(found) > 15


def test_every_key_read_from_a_section_is_declared():
    undeclared = []
    for where, number, path, key in _reads():
        if path[0] not in sections():
            undeclared.append(f"{where}:{number}: section '{path[0]}' has no model")
            continue
        if not key:
            continue
        model = _model_at(path)
        if model is not None and key not in model.model_fields:
            undeclared.append(f"{where}:{number}: {'.'.join(path)}.{key} is not declared in {model.__name__}")
    assert undeclared == []


def test_the_soak_limits_read_by_name_are_declared_with_the_thresholds_range():
    for name in LIMIT_NAMES:
        key = name.removeprefix("soak_")
        assert key in SoakSection.model_fields, key
        assert name in THRESHOLDS


def test_a_section_view_refuses_an_undeclared_key(tmp_path):
    config = tmp_path / "triton-ready.yaml"
    config.write_text("soak:\n  leak_min_duration_s: 30\nfaults:\n  rate_per_s: 5\n")
    settings = build_settings({}, {}, environ={}, config_file=str(config))
    soak = settings.section("soak")
    assert soak.get("leak_min_duration_s") == 30.0 and soak.get("window") is None  # declared, not set
    assert dict(soak) == {"leak_min_duration_s": 30.0}  # only what the file set: defaults stay the reader's
    with pytest.raises(UndeclaredKey, match="soak.leak_min_duration is not declared in SoakSection"):
        soak.get("leak_min_duration")
    with pytest.raises(UndeclaredKey):
        assert "rate_per_second" not in settings.section("faults")
    with pytest.raises(TypeError):
        soak["window"] = "1s"
    assert settings.section_model("faults").rate_per_s == 5.0
    assert settings.section_model("faults").steady_s == 1.5  # the declared default
    assert settings.section("operations") == {}


def test_every_section_of_the_file_has_a_model_and_every_model_a_docstring():
    root = file_model()
    for name, info in root.model_fields.items():
        annotation = unwrap(info.annotation)
        if is_section(annotation):
            assert name in sections() and (sections()[name].__doc__ or "").strip(), name
        else:
            assert typing.get_origin(annotation) in (list, dict), name


def test_docs_settings_reference_is_generated_from_the_declarations():
    text = (ROOT / "docs" / "settings.md").read_text()
    assert text == settings_reference(), (
        "docs/settings.md differs from the declarations; regenerate it: python -c 'from "
        "pytest_triton_ready.settings import settings_reference as r; print(r(), end=\"\")' > docs/settings.md")


def test_readme_settings_table_names_every_option_with_its_env_and_yaml_key():
    readme = (ROOT / "README.md").read_text()
    rows = [line for line in readme.splitlines() if line.startswith("| `--")]
    for option in OPTIONS:
        row = next((r for r in rows if r.startswith(f"| `{option.cli}`")), None)
        assert row is not None, f"README settings table has no row for {option.cli}"
        if option.key not in ("triton_image", "triton_gpus", "triton_shm_size"):  # one combined row
            assert f"`{option.env}`" in row and f"`{option.yaml_path}`" in row, row
    clis = {o.cli for o in OPTIONS} | {"--triton-header", "--triton-header-env", "--triton-header-file",
                                       "--triton-threshold", "--triton-config"}
    for row in rows:
        named = re.findall(r"`(--[\w-]+)", row.split("|")[1])
        assert set(named) <= clis, row


@pytest.mark.parametrize("path", sorted(
    [*ROOT.glob("examples/**/triton-ready*.yaml"), ROOT / "tests" / "data" / "quick-checklist.yaml",
     *ROOT.glob("tests/repositories/**/triton-ready.yaml")]), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_shipped_settings_file_passes_the_models(path):
    settings = build_settings({}, {}, environ={}, config_file=str(path))
    for name in sections():
        settings.section_model(name)
