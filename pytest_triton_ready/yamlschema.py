"""Validate a YAML document against a small declarative schema, with file and line in every error.

A schema is built from:
- a Python type (`str`, `int`, `float`, `bool`, `datetime.date`): a scalar of that type (an int is a
  valid float; a date is written YYYY-MM-DD, quoted or not);
- a list with one schema, `[str]`: a sequence of those;
- a dict of fixed keys, `{"http_url": str}`: a mapping; any other key is an error;
- `MapOf(schema)`: a mapping with free keys (model names, header names) and values of one schema.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml


class SchemaError(ValueError):
    """A YAML file that does not fit its schema; the message names file, line and key."""


@dataclass(frozen=True)
class MapOf:
    values: Any


def load_yaml(path: Path, schema: dict[str, Any]) -> dict[str, Any]:
    """Read `path`, check it against `schema`, and return plain Python data."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise SchemaError(f"{path}: cannot read the settings file: {exc.strerror}") from None
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        line = f":{mark.line + 1}" if mark else ""
        raise SchemaError(f"{path}{line}: not valid YAML: {exc.problem}") from None
    if node is None:
        return {}
    return _convert(node, schema, path, "")


_SCALAR_NAMES = {str: "a string", int: "an integer", float: "a number", bool: "true or false",
                 dt.date: "a date (YYYY-MM-DD)"}


def _convert(node: yaml.Node, schema: Any, path: Path, key: str) -> Any:
    where = f"{path}:{node.start_mark.line + 1}: key '{key or '<top>'}'"
    if isinstance(schema, dict):
        if not isinstance(node, yaml.MappingNode):
            raise SchemaError(f"{where}: expected a mapping, got {_kind(node)}")
        out: dict[str, Any] = {}
        for key_node, value_node in node.value:
            name = key_node.value
            child = f"{key}.{name}" if key else name
            if name not in schema:
                known = ", ".join(sorted(schema))
                raise SchemaError(
                    f"{path}:{key_node.start_mark.line + 1}: unknown key '{child}' (known here: {known})"
                )
            out[name] = _convert(value_node, schema[name], path, child)
        return out
    if isinstance(schema, MapOf):
        if not isinstance(node, yaml.MappingNode):
            raise SchemaError(f"{where}: expected a mapping, got {_kind(node)}")
        return {
            k.value: _convert(v, schema.values, path, f"{key}.{k.value}" if key else k.value) for k, v in node.value
        }
    if isinstance(schema, list):
        if not isinstance(node, yaml.SequenceNode):
            raise SchemaError(f"{where}: expected a list, got {_kind(node)}")
        return [_convert(item, schema[0], path, f"{key}[{i}]") for i, item in enumerate(node.value)]
    if not isinstance(node, yaml.ScalarNode):
        raise SchemaError(f"{where}: expected {_SCALAR_NAMES[schema]}, got {_kind(node)}")
    value = yaml.SafeLoader("").construct_object(node)
    if schema is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if schema is str and isinstance(value, (int, float)) and not isinstance(value, bool):
        value = node.value
    if schema is dt.date:
        value = _as_date(value)
    if not isinstance(value, schema) or (schema is not bool and isinstance(value, bool)):
        raise SchemaError(f"{where}: expected {_SCALAR_NAMES[schema]}, got {value!r}")
    return value


def _as_date(value: Any) -> Any:
    if isinstance(value, dt.datetime):
        return value.date()
    if isinstance(value, str):
        try:
            return dt.date.fromisoformat(value.strip())
        except ValueError:
            return value
    return value


def _kind(node: yaml.Node) -> str:
    if isinstance(node, yaml.MappingNode):
        return "a mapping"
    if isinstance(node, yaml.SequenceNode):
        return "a list"
    return repr(node.value)
