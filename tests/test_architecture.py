"""The shape of the package (docs/architecture.md): no import circle between modules or packages, no
import running up the package ranks, no private name taken from another package, one exception base.
The import graph is read from the source with an AST pass, so an import inside a function counts as
much as one at the top of a module; one under `if TYPE_CHECKING:` does not (it never runs)."""

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

# Bottom first. A module's package is its first dotted part (`load` for load.engine); a module at the
# package root is a package of its own. A package belongs to the first rank with a pattern matching
# its name and may import from its own rank and the ones below, never above; between packages of one
# rank, and between any packages, there is no import circle.
RANKS: list[tuple[str, tuple[str, ...]]] = [
    ("foundation", ("<package>", "errors", "addresses", "commands", "duration", "budget", "progress", "thresholds",
                    "yamlschema", "redaction", "facts", "counterparts", "input_data", "llm_inputs", "prompts",
                    "inputs", "expectations", "fault_declarations")),
    ("record", ("record",)),
    ("server", ("server",)),
    ("deployment", ("deployment",)),
    ("launchers", ("launchers",)),
    ("guards", ("policy", "gate")),
    ("load", ("load",)),
    ("phases", ("lint", "config", "performance", "faults", "monitoring", "security", "operations", "soak", "baseline", "fleet", "health",
                "serving", "sequences")),
    ("settings", ("settings",)),
    ("run", ("run", "run_context", "target", "demo_repository", "estimates")),
    ("report", ("report",)),
    ("entry", ("plugin", "cli")),
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


def runtime_nodes(tree: ast.AST):
    """Every node of `tree` but those under `if TYPE_CHECKING:`: an import there names a type for the
    type checker and is never run, so it is no dependency (a Protocol's module may name its users)."""
    stack = [tree]
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            stack.extend(node.orelse)
        else:
            stack.extend(ast.iter_child_nodes(node))


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or \
        (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def imports_of(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The package's modules that `name` imports anywhere in its source (functions included)."""
    is_package = path.name == "__init__.py"
    here = [] if name == "<package>" else name.split(".")
    package = here if is_package else here[:-1]
    found: set[str] = set()
    for node in runtime_nodes(ast.parse(path.read_text(), str(path))):
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


def package_of(module: str) -> str:
    return module.split(".")[0]


def rank_of(package: str) -> int | None:
    for rank, (_, patterns) in enumerate(RANKS):
        if any(fnmatch.fnmatchcase(package, pattern) for pattern in patterns):
            return rank
    return None


def package_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """The packages each package imports (its modules' imports, its own left out)."""
    packages: dict[str, set[str]] = {}
    for module, imported in graph.items():
        here = package_of(module)
        packages.setdefault(here, set()).update(package_of(target) for target in imported)
        packages[here].discard(here)
    return packages


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    found = []
    for module, imported in sorted(graph.items()):
        for target in sorted(imported):
            here, there = rank_of(package_of(module)), rank_of(package_of(target))
            if there > here:
                found.append(f"{module} ({RANKS[here][0]}) imports {target} ({RANKS[there][0]})")
    return found


def private_imports(modules: dict[str, Path]) -> list[str]:
    """`from <another package> import _name`: a package's private names are its own."""
    found = []
    for name, path in sorted(modules.items()):
        is_package = path.name == "__init__.py"
        for node in runtime_nodes(ast.parse(path.read_text(), str(path))):
            if not isinstance(node, ast.ImportFrom):
                continue
            here = [] if name == "<package>" else name.split(".")
            package = here if is_package else here[:-1]
            target = (".".join(package[:len(package) - node.level + 1] + ([node.module] if node.module else []))
                      if node.level else _absolute(node.module or ""))
            for alias in node.names:
                private = alias.name.startswith("_") and not alias.name.startswith("__")
                if private and package_of(target or "<package>") != package_of(name):
                    found.append(f"{name}:{node.lineno} imports {alias.name} from {target}")
    return found


def layer_picture(graph: dict[str, set[str]]) -> str:
    """The ranks as a mermaid graph, bottom up, with an arrow for each rank another imports from."""
    packages = package_graph(graph)
    lines = ["```mermaid", "graph BT"]
    for rank, (title, _) in enumerate(RANKS):
        members = sorted(package for package in packages if rank_of(package) == rank)
        shown = [PACKAGE if member == "<package>" else member for member in members]
        lines.append(f'    r{rank}["<b>{title}</b><br/>{", ".join(shown)}"]')
    arrows = sorted({(rank_of(package), rank_of(target)) for package, imported in packages.items()
                     for target in imported if rank_of(target) != rank_of(package)})
    lines += [f"    r{importer} --> r{imported}" for importer, imported in arrows] + ["```"]
    return "\n".join(lines)


PICTURE = Path(__file__).resolve().parent.parent / "docs" / "architecture.md"
BEGIN, END = "<!-- layers: generated by `python tests/test_architecture.py` -->", "<!-- layers end -->"


def test_the_graph_sees_every_kind_of_import():
    graph = import_graph()
    assert "launchers.registry" in graph["target"]  # from .launchers.registry import ...
    assert "progress" in graph["plugin.results"]  # `from . import progress` inside a function
    assert "faults.crash_experiments" in graph["faults.declared_experiments"]
    assert "<package>" in graph["run"]  # `from . import __version__` inside a function imports the package itself
    assert "<package>" not in graph["plugin.results"]  # `from . import progress` is the module, not the package


def test_the_circle_finder_finds_a_circle_held_open_by_a_function_level_import():
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert circles({"a": {"b"}, "b": set()}) == []


def test_no_import_circle():
    assert circles(import_graph()) == []


def test_no_circle_between_packages():
    assert circles(package_graph(import_graph())) == []


def test_every_package_has_a_rank():
    assert sorted({package_of(module) for module in import_graph()
                   if rank_of(package_of(module)) is None}) == []


def test_no_import_runs_up_the_ranks():
    assert upward_imports(import_graph()) == []


def test_an_upward_import_is_reported():
    assert upward_imports({"settings": {"report.html"}, "report.html": set()}) == [
        "settings (settings) imports report.html (report)"]
    assert package_graph({"load.engine": {"load.stats", "server.client"}}) == {"load": {"server"}}


def test_an_import_under_type_checking_is_no_dependency():
    tree = ast.parse("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..settings import Settings\n"
                     "else:\n    import os\nimport sys\n")
    names = [alias.name for node in runtime_nodes(tree) if isinstance(node, (ast.Import, ast.ImportFrom))
             for alias in node.names]
    assert sorted(names) == ["TYPE_CHECKING", "os", "sys"]


def test_no_private_name_is_imported_from_another_package():
    assert private_imports(package_modules()) == []


def test_the_layer_picture_in_the_docs_is_the_generated_one():
    text = PICTURE.read_text()
    assert BEGIN in text and END in text, f"{PICTURE.name} has no generated layer picture"
    drawn = text[text.index(BEGIN) + len(BEGIN):text.index(END)].strip()
    assert drawn == layer_picture(import_graph()), "run `python tests/test_architecture.py` to redraw it"


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



def test_every_package_folder_is_in_the_distribution():
    """pyproject.toml lists the packages the wheel (and an editable install) holds: a folder left
    out imports from a checkout but not from an installed plugin."""
    import tomllib

    listed = set(tomllib.loads((ROOT.parent / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    folders = {".".join((PACKAGE, *init.parent.relative_to(ROOT).parts)).rstrip(".")
               for init in ROOT.rglob("__init__.py")
               if not any(fnmatch.fnmatchcase(module_name(init), pattern) for pattern in NOT_PACKAGE_CODE)}
    assert sorted(folders - listed) == []


TYPED_ROLES = {"check": "CheckRecorder", "target": "ServerUnderTest"}


def untyped_roles(modules: dict[str, Path]) -> list[str]:
    """A parameter or field named `check` or `target` typed `Any`: the recorder (record/recorder.py)
    and the server under test (server/under_test.py) have their types."""
    found = []
    for name, path in sorted(modules.items()):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.arg):
                role, annotation = node.arg, node.annotation
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                role, annotation = node.target.id, node.annotation
            else:
                continue
            if role in TYPED_ROLES and isinstance(annotation, ast.Name) and annotation.id == "Any":
                found.append(f"{name}:{node.lineno} {role}: Any (a {TYPED_ROLES[role]})")
    return found


def test_the_recorder_and_the_server_under_test_are_typed():
    assert untyped_roles(package_modules()) == []

if __name__ == "__main__":
    text = PICTURE.read_text()
    PICTURE.write_text(text[:text.index(BEGIN) + len(BEGIN)] + "\n" + layer_picture(import_graph()) + "\n"
                       + text[text.index(END):])
    print(f"redrew the layer picture in {PICTURE}")
