"""Checks read as their rules: in every checks file, every check body (without its docstring)
is at most MAX_BODY_LINES lines, and the module holds only checks and fixtures; the logic lives
in the package, with unit tests."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

CHECKS = Path(__file__).parent.parent / "checks"
MAX_BODY_LINES = 30
READ_AS_RULES = tuple(sorted(p.name for p in CHECKS.glob("test_*.py")))


def _functions(path: Path) -> list[ast.FunctionDef]:
    return [node for node in ast.parse(path.read_text()).body if isinstance(node, ast.FunctionDef)]


def _is_fixture(function: ast.FunctionDef) -> bool:
    return any("fixture" in ast.unparse(decorator) for decorator in function.decorator_list)


def body_lines(function: ast.FunctionDef) -> int:
    body = function.body
    if isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]
    return body[-1].end_lineno - body[0].lineno + 1 if body else 0


@pytest.mark.parametrize("name", READ_AS_RULES)
def test_every_check_body_is_short(name):
    long = {f.name: body_lines(f) for f in _functions(CHECKS / name) if body_lines(f) > MAX_BODY_LINES}
    assert not long, f"checks/{name}: bodies over {MAX_BODY_LINES} lines: {long}; move their logic into the package"


@pytest.mark.parametrize("name", READ_AS_RULES)
def test_the_file_holds_only_checks_and_fixtures(name):
    tree = ast.parse((CHECKS / name).read_text())
    helpers = [node.name for node in tree.body if isinstance(node, (ast.FunctionDef, ast.ClassDef))
               and not (node.name.startswith("test_") or (isinstance(node, ast.FunctionDef) and _is_fixture(node)))]
    assert not helpers, f"checks/{name} holds helpers {helpers}; they belong in the package"


def test_the_length_counts_the_body_without_its_docstring():
    [function] = ast.parse('def f():\n    """doc\n    more"""\n    a = 1\n\n    return a\n').body
    assert body_lines(function) == 3
