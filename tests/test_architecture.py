"""The shape of the package (docs/architecture.md): no import circle, no import running up the
layers, one exception base. The import graph is read from the source with an AST pass, so an
import inside a function counts as much as one at the top of a module."""

from __future__ import annotations

import ast
import fnmatch
import importlib
import pkgutil
from pathlib import Path

import pytest

import pytest_triton_ready
from pytest_triton_ready.errors import TritonReadyError

PACKAGE = "pytest_triton_ready"
ROOT = Path(pytest_triton_ready.__file__).parent
# Model files the demo repository serves (they run inside tritonserver, not in this package).
NOT_PACKAGE_CODE = ("demo.*",)

# Bottom first. A module belongs to the first layer with a pattern that matches its dotted name
# (without the package prefix); it may import from its own layer and the ones below.
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("foundation", ("<package>", "errors", "progress", "commands", "budget", "input_data", "llm_inputs", "prompts",
                    "expectations", "pipelines", "addresses", "yamlschema",
                    "deployment", "deployment.reading", "deployment.validation", "deployment.manifest",
                    "deployment.judgement", "deployment.probes", "deployment.termination", "deployment.resources",
                    "deployment.posture", "deployment.measured", "deployment.arguments", "deployment.kserve", "deployment.pod_limits",
                    "deployment.live",
                    "deployment.compose", "deployment.compose_gpus", "deployment.compose_values", "deployment.compose_words",
                    "thresholds", "redaction",
                    "server_log", "inputs", "soak.duration", "report.model", "report.text", "report.verdict",
                    "recorder", "facts", "counterparts")),
    ("server", ("client", "metrics", "gpu", "models", "report.context")),
    ("declarations", ("launchers", "launchers.registry", "launchers.ulimits", "*.schema", "policy", "gate",
                      "faults.declared", "load.profile", "monitoring.config", "soak.schedule",
                      "fleet.targets")),
    ("settings", ("options", "settings_file", "settings", "settings_reference", "run", "target", "demo_repository",
                  "estimates", "launchers.*")),
    ("phases", ("health", "sequences", "serving", "load", "load.*", "faults", "faults.*", "monitoring", "monitoring.*", "lint", "lint.*",
                "security", "security.*", "operations", "operations.*", "fleet", "fleet.*", "baseline",
                "baseline.*", "soak", "soak.*", "deployment", "deployment.*")),
    ("report", ("report", "report.*")),
    ("entry", ("plugin", "plugin_*", "cli")),
]


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts) or "<package>"


def package_modules() -> dict[str, Path]:
    modules = {module_name(path): path for path in ROOT.rglob("*.py")}
    return {name: path for name, path in modules.items()
            if not any(fnmatch.fnmatchcase(name, pattern) for pattern in NOT_PACKAGE_CODE)}


def _absolute(name: str) -> str:
    """'pytest_triton_ready.load.engine' -> 'load.engine'; the package itself -> '<package>'."""
    return name.removeprefix(PACKAGE).lstrip(".") or "<package>"


def imports_of(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The package's modules that `name` imports anywhere in its source (functions included)."""
    is_package = path.name == "__init__.py"
    here = [] if name == "<package>" else name.split(".")
    package = here if is_package else here[:-1]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(_absolute(alias.name) for alias in node.names if alias.name.startswith(PACKAGE))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[:len(package) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else [])) or "<package>"
            elif node.module and node.module.startswith(PACKAGE):
                target = _absolute(node.module)
            else:
                continue
            for alias in node.names:  # `from . import progress` imports the module progress
                sub = alias.name if target == "<package>" else f"{target}.{alias.name}"
                found.add(sub if sub in modules else target)
    found.discard(name)
    return {module for module in found if module in modules}


def import_graph() -> dict[str, set[str]]:
    modules = package_modules()
    return {name: imports_of(name, path, modules) for name, path in modules.items()}


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for imported in sorted(graph.get(module, ())):
            if imported not in index:
                visit(imported)
                low[module] = min(low[module], low[imported])
            elif imported in on_stack:
                low[module] = min(low[module], index[imported])
        if low[module] == index[module]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == module:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return found


def layer_of(module: str) -> int | None:
    for rank, (_, patterns) in enumerate(LAYERS):
        if any(fnmatch.fnmatchcase(module, pattern) for pattern in patterns):
            return rank
    return None


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    found = []
    for module, imported in sorted(graph.items()):
        for target in sorted(imported):
            if layer_of(target) > layer_of(module):
                found.append(f"{module} ({LAYERS[layer_of(module)][0]}) imports {target} "
                             f"({LAYERS[layer_of(target)][0]})")
    return found


def test_the_graph_sees_every_kind_of_import():
    graph = import_graph()
    assert "launchers.registry" in graph["target"]  # from .launchers.registry import ...
    assert "progress" in graph["plugin_results"]  # `from . import progress` inside a function
    assert "faults.crash_experiments" in graph["faults.declared_experiments"]
    assert "<package>" in graph["run"]  # `from . import __version__` inside a function imports the package itself
    assert "<package>" not in graph["plugin_results"]  # `from . import progress` is the module, not the package


def test_the_circle_finder_finds_a_circle_held_open_by_a_function_level_import():
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert circles({"a": {"b"}, "b": set()}) == []


def test_no_import_circle():
    assert circles(import_graph()) == []


def test_every_module_has_a_layer():
    assert [module for module in import_graph() if layer_of(module) is None] == []


def test_no_import_runs_up_the_layers():
    assert upward_imports(import_graph()) == []


def test_an_upward_import_is_reported():
    assert upward_imports({"settings": {"report.html"}, "report.html": set()}) == [
        "settings (settings) imports report.html (report)"]


@pytest.mark.parametrize("module", sorted(m.name for m in pkgutil.walk_packages(pytest_triton_ready.__path__,
                                                                                f"{PACKAGE}.")
                                          if ".demo." not in m.name))
def test_every_error_the_package_defines_is_a_triton_ready_error(module):
    loaded = importlib.import_module(module)
    errors = [value for value in vars(loaded).values()
              if isinstance(value, type) and issubclass(value, BaseException) and value.__module__ == module]
    assert [error.__name__ for error in errors if not issubclass(error, TritonReadyError)] == []


def test_no_check_reaches_into_the_plugin():
    """Checks get the run, the settings and the server through fixtures, never the plugin's internals."""
    checks = Path(__file__).resolve().parent.parent / "checks"
    assert sorted(checks.glob("test_*.py"))
    found = []
    for path in sorted(checks.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = [node.module or ""] if isinstance(node, ast.ImportFrom) else \
                [alias.name for alias in node.names] if isinstance(node, ast.Import) else []
            if any(name == f"{PACKAGE}.plugin" or name.startswith(f"{PACKAGE}.plugin_") for name in names):
                found.append(f"{path.name}:{node.lineno}")
    assert found == []


MAX_MODULE_LINES = 500
# Modules still over the limit whose split along their seams is yet to come (issue 26 item 6). An
# entry that is no longer over the limit fails the test too, so this list only shrinks.
LONG_MODULES_TO_SPLIT: set[str] = set()


def test_no_module_is_over_500_lines():
    """A module holds one job; one that grows past MAX_MODULE_LINES splits along its seams."""
    lines = {name: len(path.read_text().splitlines()) for name, path in package_modules().items()}
    long = {name for name, count in lines.items() if count > MAX_MODULE_LINES}
    assert sorted(long - LONG_MODULES_TO_SPLIT) == [], {name: lines[name] for name in long - LONG_MODULES_TO_SPLIT}
    assert sorted(LONG_MODULES_TO_SPLIT - long) == [], "split already: remove from LONG_MODULES_TO_SPLIT"


@pytest.mark.parametrize("module", ["pytest_triton_ready.plugin", "pytest_triton_ready.cli",
                                    "pytest_triton_ready.policy"])
def test_an_entry_module_imports_on_its_own(module):
    """A fresh interpreter imports each entry module first, as pytest loads the plugin: an import
    cycle that a test session's import order happens to hide fails here (a top-level import of
    policy in faults/injector.py once broke every checklist run)."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", f"import {module}"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr.strip().splitlines()[-1:]
