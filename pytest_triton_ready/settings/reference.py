"""docs/settings.md, generated from the declarations: the options, the YAML file's sections and
the thresholds (tests/test_settings_declared.py keeps the file and the code equal)."""

from __future__ import annotations

from ..thresholds import THRESHOLDS
from ..yamlschema import settings_table
from .file import SloSection, file_model, sections
from .options import OPTIONS

SECTION_DOCS = {
    "server": "docs/container-and-gpu.md", "container": "docs/container-and-gpu.md", "models": "docs/models.md",
    "inputs": "README.md", "report": "docs/report.md",
    "lint": "docs/config-rules.md", "performance": "docs/load-engine.md", "soak": "docs/soak.md",
    "faults": "docs/faults.md", "monitoring": "docs/monitoring.md", "operations": "docs/operations-security.md",
    "security": "docs/operations-security.md", "fleet": "docs/fleet.md", "deployment": "docs/deployment.md",
}


def settings_reference() -> str:
    """docs/settings.md, generated from OPTIONS, the section models and THRESHOLDS."""
    out = [
        "# Settings reference",
        "",
        "Generated from the declarations in the code (`OPTIONS` in `pytest_triton_ready/settings/options.py`, the",
        "section models in `pytest_triton_ready/settings/file.py`, each phase's section model,",
        "`pytest_triton_ready/thresholds.py`);",
        "`tests/test_settings_declared.py` fails when this file and the code disagree. Regenerate with",
        "",
        "    python -c 'from pytest_triton_ready.settings.reference import settings_reference as r; "
        "print(r(), end=\"\")' > docs/settings.md",
        "",
        "Precedence, highest first: a check's marker > command line > environment > YAML > ini > default.",
        "A bad value (wrong type, out of range, nan or inf, a malformed URL, an unknown key or threshold)",
        "or two settings that contradict each other is a usage error (exit code 4) naming the setting and",
        "where it came from: `cli`, the environment variable, `FILE:LINE` of the YAML file, or the ini key.",
        "",
        "## Options",
        "",
        "| option | environment | ini | YAML | default | meaning |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for option in OPTIONS:
        default = "none" if option.default is None else f"`{option.default}`"
        out.append(f"| `{option.cli}` | `{option.env}` | `{option.ini}` | `{option.yaml_path}` | {default} | "
                   f"{option.help} |")
    out += ["| `--triton-header 'Name: value'` | | | `server.headers` | none | extra request header (auth); "
            "repeatable; values never appear in any output |",
            "| `--triton-threshold NAME=VALUE` | | | `thresholds.NAME` | see below | override a named threshold; "
            "repeatable |",
            "| `--triton-input-data MODEL=FILE` | | | `inputs.data.MODEL` | none | requests to MODEL carry the "
            "entries of FILE, a perf_analyzer --input-data JSON file (docs/models.md); repeatable |",
            "| `--triton-config` | `TRITON_READY_CONFIG` | `triton_config` | | none | the YAML file |", ""]
    out += ["`--triton-url` together with `--triton-launch=embedded` or `container` is a usage error unless",
            "the launcher comes from a stronger source than the URL (a launched server has its own URL).", ""]
    out += ["## YAML sections", ""]
    models = sections()
    root = file_model()
    for name in root.model_fields:
        model = models.get(name)
        if model is None:
            continue
        doc = " ".join((model.__doc__ or "").strip().split("\n\n")[0].split())
        where = SECTION_DOCS.get(name, "README.md")
        link = f" See [{where.removeprefix('docs/')}]({where.removeprefix('docs/')})." if where != "README.md" else ""
        out += [f"### `{name}:`", "", doc + link,
                "", settings_table(model, name).rstrip("\n"), ""]
    out += ["### `slo:`, `thresholds:`", "",
            "`slo.<model>` (and `slo.default`):",
            "", settings_table(SloSection, "slo.<model>").rstrip("\n"), "",
            "## Thresholds", "",
            "Every number a check compares with; `thresholds.NAME` in the YAML or `--triton-threshold NAME=VALUE`.",
            "A value outside its range is a usage error.", "",
            "| threshold | default | unit | range | meaning |", "| --- | --- | --- | --- | --- |"]
    for tname, spec in THRESHOLDS.items():
        kind = spec.range.describe() + (", whole number" if spec.range.integer else "")
        out.append(f"| `{tname}` | {spec.default:g} | {spec.unit} | {kind} | {spec.help} |")
    return "\n".join(out) + "\n"
