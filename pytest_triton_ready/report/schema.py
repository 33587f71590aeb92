"""The JSON Schema of readiness.json, shipped in the package, and validation against it."""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources
from typing import Any

from ..errors import TritonReadyError

SCHEMA_FILE = "readiness.schema.json"


class ReportInvalid(TritonReadyError, ValueError):
    """A document that does not match the schema; the message names the first bad field."""


@lru_cache(maxsize=1)
def readiness_schema() -> dict[str, Any]:
    """The schema as shipped in the package (pytest_triton_ready/report/readiness.schema.json)."""
    return json.loads(resources.files(__package__).joinpath(SCHEMA_FILE).read_text(encoding="utf-8"))


def schema_errors(document: Any) -> list[str]:
    """Every violation as 'path: message', sorted by path; empty when the document is valid."""
    import jsonschema

    validator_class = jsonschema.validators.validator_for(readiness_schema())
    validator = validator_class(readiness_schema())
    errors = sorted(validator.iter_errors(document), key=lambda e: list(map(str, e.absolute_path)))
    return [f"{'/'.join(map(str, e.absolute_path)) or '(document)'}: {e.message}" for e in errors]


def validate(document: Any, origin: str = "readiness document") -> None:
    """Raise ReportInvalid naming `origin` and the first bad field when `document` does not match."""
    errors = schema_errors(document)
    if errors:
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        raise ReportInvalid(f"{origin} does not match the readiness schema: {errors[0]}{more}")
