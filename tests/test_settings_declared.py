"""Every YAML key the code reads is declared in its section's model, and the docs tables are the
models' own: no server needed."""

from __future__ import annotations

import re
import typing
from pathlib import Path

import pytest

from pytest_triton_ready.settings import build_settings
from pytest_triton_ready.settings.file import file_model, sections
from pytest_triton_ready.settings.options import OPTIONS
from pytest_triton_ready.settings.reference import settings_reference
from pytest_triton_ready.soak.schema import LIMIT_NAMES, SoakSection
from pytest_triton_ready.thresholds import THRESHOLDS
from pytest_triton_ready.yamlschema import is_section, unwrap

ROOT = Path(__file__).resolve().parent.parent
SOURCES = sorted([*(ROOT / "pytest_triton_ready").rglob("*.py"), *(ROOT / "checks").glob("*.py")])

SECTION_MODEL_ATTR = re.compile(r'\.section_model\("(\w+)"\)\.(\w+)')
DICT_READ = re.compile(r'\.section\("\w+"\)')


def _reads() -> list[tuple[str, int, tuple[str, ...], str]]:
    """(file, line, section path, key) for every key read from a settings section in the source."""
    reads = []
    for source in SOURCES:
        where = str(source.relative_to(ROOT))
        for number, line in enumerate(source.read_text().splitlines(), 1):
            for name, attr in SECTION_MODEL_ATTR.findall(line):
                reads.append((where, number, (name,), attr))
    return reads


def test_the_scan_finds_the_reads_it_is_meant_to_find():
    found = {(f, p, k) for f, _, p, k in _reads()}
    assert ("pytest_triton_ready/lint/deployment.py", ("lint",), "measures_model_memory") in found
    assert ("pytest_triton_ready/security/api_audit.py", ("security",), "restricted_apis") in found
    assert ("pytest_triton_ready/launchers/embedded.py", ("server",), "args") in found
    assert ("pytest_triton_ready/run.py", ("gate",), "allow_flaky") in found
    assert len(found) > 10


def test_every_key_read_from_a_section_is_declared():
    undeclared = []
    for where, number, path, key in _reads():
        model = sections().get(path[0])
        if model is None:
            undeclared.append(f"{where}:{number}: section '{path[0]}' has no model")
        elif key not in model.model_fields and not isinstance(getattr(model, key, None), property):
            undeclared.append(f"{where}:{number}: {path[0]}.{key} is not declared in {model.__name__}")
    assert undeclared == []


def test_no_code_reads_a_section_as_a_dict():
    """One way to read a section: typed (`settings.section_model(name)`), with its declared defaults."""
    found = [f"{source.relative_to(ROOT)}:{number}" for source in SOURCES
             for number, line in enumerate(source.read_text().splitlines(), 1) if DICT_READ.search(line)]
    assert found == []


def test_the_soak_limits_read_by_name_are_declared_with_the_thresholds_range():
    for name in LIMIT_NAMES:
        key = name.removeprefix("soak_")
        assert key in SoakSection.model_fields, key
        assert name in THRESHOLDS


def test_a_section_is_read_one_way_typed_with_its_declared_defaults(tmp_path):
    config = tmp_path / "triton-ready.yaml"
    config.write_text("soak:\n  leak_min_duration_s: 30\nfaults:\n  rate_per_s: 5\n")
    settings = build_settings({}, {}, environ={}, config_file=str(config))
    soak = settings.section_model("soak")
    assert soak.leak_min_duration_s == 30.0 and soak.window is None  # declared, not set
    assert soak.model_fields_set == {"leak_min_duration_s"}  # what the file set
    with pytest.raises(AttributeError):
        soak.leak_min_duration  # noqa: B018  (an undeclared key fails loudly)
    assert settings.section_model("faults").rate_per_s == 5.0
    assert settings.section_model("faults").steady_s == 1.5  # the declared default
    assert settings.section_model("performance").tune_queue_delays_us == [0, 100, 500, 2000, 10000]
    assert settings.section_model("lint").measure_model_memory is None  # declared: when the run owns the server
    assert settings.section_model("lint").measures_model_memory
    assert settings.section_model("operations").model_fields_set == set()
    assert not hasattr(settings, "section")  # one way to read a section


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
        "pytest_triton_ready.settings.reference import settings_reference as r; print(r(), end=\"\")' > docs/settings.md")


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
