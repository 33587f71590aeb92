"""YAML sections as typed models, and a loader whose every error names file, line and key.

Each YAML section is declared once, by the phase that owns it, as a `Section` (a pydantic model
that refuses unknown keys and non-finite numbers). From that one declaration come the schema check
(`load_yaml`), the defaults, the error messages and the settings tables in docs/
(`settings_table`). Field help is the field's `description`; a unit goes in
`json_schema_extra={"unit": ...}` (see `setting`).

A loaded section is read one way, typed, with its declared defaults filled in
(`settings.section_model("soak").window`); a key the model does not declare is an AttributeError,
and `model_fields_set` says which keys the file set.
"""

from __future__ import annotations

import datetime as dt
import types
import typing
from pathlib import Path
from typing import Any, Union

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic.fields import FieldInfo

from .errors import TritonReadyError


class SchemaError(TritonReadyError, ValueError):
    """A YAML file that does not fit its schema; the message names file, line and key."""


class Section(BaseModel):
    """A YAML section (or a mapping inside one): fixed keys, typed values, finite numbers."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, coerce_numbers_to_str=True, frozen=True)


def setting(default: Any = None, help: str = "", *, unit: str | None = None, **constraints: Any) -> Any:
    """A Section field: its default, the help shown in docs tables, its unit and constraints
    (pydantic's gt/ge/lt/le/min_length...)."""
    extra = {"unit": unit} if unit else None
    if default in (list, dict) or (callable(default) and not isinstance(default, type)):
        return Field(default_factory=default, description=help, json_schema_extra=extra, **constraints)
    return Field(default, description=help, json_schema_extra=extra, **constraints)


# -- loading ----------------------------------------------------------------------------------
Loc = tuple[str | int, ...]


class Lines:
    """Where each key and value of a YAML document is: 1-based lines by location tuple."""

    def __init__(self) -> None:
        self.keys: dict[Loc, int] = {}
        self.values: dict[Loc, int] = {}

    def key(self, loc: Loc) -> int | None:
        return self._nearest(self.keys, loc) or self._nearest(self.values, loc)

    def value(self, loc: Loc) -> int | None:
        return self._nearest(self.values, loc) or self._nearest(self.keys, loc)

    @staticmethod
    def _nearest(table: dict[Loc, int], loc: Loc) -> int | None:
        for end in range(len(loc), -1, -1):
            if loc[:end] in table:
                return table[loc[:end]]
        return None


def load_yaml(path: Path, model: type[BaseModel]) -> tuple[BaseModel, dict[str, Any], Lines]:
    """Read `path` and check it against `model`: the typed document, the plain data it set
    (only the keys the file has) and where each key is. SchemaError names file:line:key."""
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
    lines = Lines()
    if node is None:
        data: Any = {}
    else:
        data = _plain(node, (), lines)
    if not isinstance(data, dict):
        raise SchemaError(f"{path}:1: key '<top>': expected a mapping, got {_kind(data)}")
    document = validate(model, data, path, lines)
    return document, data, lines


def validate(model: type[BaseModel], data: Any, path: Path | str, lines: Lines | None = None,
             prefix: Loc = ()) -> BaseModel:
    """`model` from `data`; SchemaError with `path:line: key 'a.b': problem` on the first error
    (first in the file)."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise SchemaError(describe_error(exc, model, path, lines or Lines(), prefix)) from None


def describe_error(exc: ValidationError, model: type[BaseModel], path: Path | str, lines: Lines,
                   prefix: Loc = ()) -> str:
    errors = exc.errors(include_url=False)

    def line_of(error: dict[str, Any]) -> int:
        loc = prefix + tuple(error["loc"])
        found = lines.key(loc) if error["type"] == "extra_forbidden" else lines.value(loc)
        return found or 0

    error = min(errors, key=line_of)
    loc = tuple(error["loc"])
    line = line_of(error)
    where = f"{path}:{line}" if line else f"{path}"
    dotted = _dotted(prefix + loc)
    if error["type"] == "extra_forbidden":
        known = ", ".join(sorted(_fields_at(model, loc[:-1])))
        return f"{where}: unknown key '{dotted}' (known here: {known})"
    expected = _EXPECTED.get(error["type"])
    got = error.get("input")
    if expected:
        return f"{where}: key '{dotted or '<top>'}': expected {expected}, got {_kind(got)}"
    message = str(error["msg"]).removeprefix("Value error, ").removeprefix("Assertion failed, ")
    message = message.replace("Input should be", "must be")
    if " got " not in message:
        message += f", got {_kind(got)}"
    return f"{where}: key '{dotted or '<top>'}': {message}"


_EXPECTED = {
    "string_type": "a string", "int_type": "an integer", "int_parsing": "an integer",
    "int_from_float": "an integer", "float_type": "a number", "float_parsing": "a number",
    "bool_type": "true or false", "bool_parsing": "true or false",
    "date_type": "a date (YYYY-MM-DD)", "date_parsing": "a date (YYYY-MM-DD)",
    "date_from_datetime_parsing": "a date (YYYY-MM-DD)", "date_from_datetime_inexact": "a date (YYYY-MM-DD)",
    "dict_type": "a mapping", "model_type": "a mapping", "model_attributes_type": "a mapping",
    "list_type": "a list", "finite_number": "a finite number",
}


def _plain(node: yaml.Node, loc: Loc, lines: Lines) -> Any:
    lines.values[loc] = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        out: dict[str, Any] = {}
        for key_node, value_node in node.value:
            name = str(key_node.value)
            lines.keys[loc + (name,)] = key_node.start_mark.line + 1
            out[name] = _plain(value_node, loc + (name,), lines)
        return out
    if isinstance(node, yaml.SequenceNode):
        return [_plain(item, loc + (i,), lines) for i, item in enumerate(node.value)]
    return yaml.SafeLoader("").construct_object(node)


def _dotted(loc: Loc) -> str:
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def _kind(value: Any) -> str:
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dt.date):
        return repr(value.isoformat())
    return repr(value)


# -- walking the declarations -----------------------------------------------------------------
def unwrap(annotation: Any) -> Any:
    """The annotation without Optional/Annotated."""
    while True:
        origin = typing.get_origin(annotation)
        if origin is typing.Annotated:
            annotation = typing.get_args(annotation)[0]
        elif origin in (Union, types.UnionType):
            args = [a for a in typing.get_args(annotation) if a is not type(None)]
            if len(args) != 1:
                return annotation
            annotation = args[0]
        else:
            return annotation


def is_section(annotation: Any) -> bool:
    annotation = unwrap(annotation)
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)


def _fields_at(model: type[BaseModel], loc: Loc) -> list[str]:
    node: Any = model
    for part in loc:
        node = unwrap(node)
        if isinstance(node, type) and issubclass(node, BaseModel):
            if not isinstance(part, str) or part not in node.model_fields:
                return []
            node = node.model_fields[part].annotation
            continue
        origin = typing.get_origin(node)
        if origin in (dict, list):
            node = typing.get_args(node)[-1]
            continue
        return []
    node = unwrap(node)
    if isinstance(node, type) and issubclass(node, BaseModel):
        return list(node.model_fields)
    return []


def describe_type(annotation: Any) -> str:
    """A reader's name for a field's type, for the docs tables."""
    annotation = unwrap(annotation)
    origin = typing.get_origin(annotation)
    if origin is typing.Literal:
        return " \\| ".join(str(a) for a in typing.get_args(annotation))
    if origin is list:
        return f"list of {describe_type(typing.get_args(annotation)[0])}"
    if origin is dict:
        return f"map of {describe_type(typing.get_args(annotation)[1])}"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return "mapping"
    return {str: "string", int: "integer", float: "number", bool: "bool", dt.date: "date", Path: "path"}.get(
        annotation, getattr(annotation, "__name__", str(annotation)))


def _constraint_text(info: FieldInfo) -> str:
    parts = []
    for item in info.metadata:
        for attr, sign in (("gt", ">"), ("ge", ">="), ("lt", "<"), ("le", "<=")):
            value = getattr(item, attr, None)
            if value is not None:
                parts.append(f"{sign} {value:g}" if isinstance(value, (int, float)) else f"{sign} {value}")
    return ", ".join(parts)


def _default_text(info: FieldInfo) -> str:
    extra = info.json_schema_extra if isinstance(info.json_schema_extra, dict) else {}
    if "shown_default" in extra:
        return f"`{extra['shown_default']}`"
    if info.default_factory is not None:
        value = info.default_factory()
        return "none" if not value else f"`{value}`"
    value = info.default
    if value is None:
        return "none"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, float):
        return f"`{value:g}`"
    return f"`{value}`"


def settings_rows(model: type[BaseModel], prefix: str) -> list[tuple[str, str, str, str]]:
    """(key, type and range, default, meaning) for every key of `model`, nested sections flattened."""
    rows: list[tuple[str, str, str, str]] = []
    for name, info in model.model_fields.items():
        key = f"{prefix}.{name}" if prefix else name
        annotation = unwrap(info.annotation)
        if is_section(annotation) and annotation is not model:
            if info.description:
                rows.append((key, "mapping", "", info.description))
            rows.extend(settings_rows(unwrap(annotation), key))
            continue
        if typing.get_origin(annotation) is dict and is_section(typing.get_args(annotation)[1]):
            inner = unwrap(typing.get_args(annotation)[1])
            rows.append((key, "map of mappings", "", info.description or ""))
            rows.extend(settings_rows(inner, f"{key}.<name>"))
            continue
        kind = describe_type(annotation)
        limits = _constraint_text(info)
        extra = info.json_schema_extra if isinstance(info.json_schema_extra, dict) else {}
        unit = extra.get("unit")
        kind = kind + (f" ({unit})" if unit else "") + (f", {limits}" if limits else "")
        meaning = info.description or ""
        if extra.get("option"):
            meaning += f" (as `{extra['option']}`, env `{extra['env']}`)"
        rows.append((key, kind, _default_text(info), meaning))
    return rows


def settings_table(model: type[BaseModel], prefix: str) -> str:
    """The Markdown table of a section's keys: what docs/ show, generated from the model."""
    out = ["| key | type | default | meaning |", "| --- | --- | --- | --- |"]
    for key, kind, default, meaning in settings_rows(model, prefix):
        out.append(f"| `{key}` | {kind} | {default} | {meaning.replace('|', chr(92) + '|')} |")
    return "\n".join(out) + "\n"
