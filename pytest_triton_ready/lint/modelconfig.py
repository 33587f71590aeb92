"""Read Triton model configurations into tritonclient's `ModelConfig` protobuf message.

From a repository: each `<model>/config.pbtxt` is parsed with protobuf text_format, so a syntax
error names the file, line and column. From a live server: `GET /v2/models/M/config` (JSON) goes
through json_format.ParseDict, the same message either way, so every rule reads one shape.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from google.protobuf import json_format, text_format

from ..errors import TritonReadyError

CONFIG_FILE = "config.pbtxt"
_POSITION_PREFIX = re.compile(r"^\d+:\d+ : ")


def model_config_pb2():
    """tritonclient's generated module (imported on first use: it pulls in grpc)."""
    from tritonclient.grpc import model_config_pb2 as module

    return module


class ConfigSyntaxError(TritonReadyError, ValueError):
    """A config that protobuf cannot read; `str()` is `file:line:column: reason`."""

    def __init__(self, origin: str, line: int | None, column: int | None, reason: str) -> None:
        self.origin, self.line, self.column, self.reason = origin, line, column, reason
        where = origin + (f":{line}" if line else "") + (f":{column}" if line and column else "")
        super().__init__(f"{where}: {reason}")


@dataclass
class ModelSource:
    """One model's configuration and where it was read from.

    `explicit_fields` holds the top-level fields the author wrote; it is None for a live config,
    where the server has filled in its defaults and what was written can no longer be told apart.
    `versions_on_disk` lists the numeric version directories next to the config file.
    """

    name: str
    config: Any  # model_config_pb2.ModelConfig
    origin: str
    explicit_fields: set[str] | None = None
    versions_on_disk: list[int] = field(default_factory=list)

    @property
    def from_file(self) -> bool:
        return self.explicit_fields is not None

    def wrote(self, field_name: str) -> bool | None:
        """Whether the author set a top-level field; None when unknowable (live config)."""
        if self.explicit_fields is None:
            return None
        return field_name in self.explicit_fields


def parse_config_text(text: str, origin: str) -> Any:
    """A ModelConfig from config.pbtxt text; ConfigSyntaxError with line and column otherwise."""
    config = model_config_pb2().ModelConfig()
    try:
        text_format.Parse(text, config)
    except text_format.ParseError as exc:
        reason = _POSITION_PREFIX.sub("", str(exc))
        raise ConfigSyntaxError(origin, exc.GetLine(), exc.GetColumn(), reason) from None
    return config


def read_model_directory(directory: Path) -> ModelSource:
    """The model in one repository directory; its name defaults to the directory's, as in Triton."""
    path = directory / CONFIG_FILE
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigSyntaxError(str(path), None, None, f"cannot read: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise ConfigSyntaxError(str(path), None, None, f"not UTF-8 text: {exc.reason}") from None
    config = parse_config_text(text, str(path))
    written = {descriptor.name for descriptor, _ in config.ListFields()}
    if not config.name:
        config.name = directory.name
    elif config.name != directory.name:
        raise ConfigSyntaxError(str(path), None, None,
                                f"name {config.name!r} differs from its directory {directory.name!r}; "
                                "Triton refuses to load it")
    versions = sorted(int(p.name) for p in directory.iterdir() if p.is_dir() and p.name.isdigit())
    return ModelSource(config.name, config, str(path), written, versions)


def read_repository(repository: Path, models: Iterable[str] = ()) -> tuple[list[ModelSource], list[ConfigSyntaxError]]:
    """Every model directory of a repository (or only `models`): what parsed, and what did not."""
    wanted = set(models)
    sources: list[ModelSource] = []
    errors: list[ConfigSyntaxError] = []
    for directory in sorted(p for p in Path(repository).iterdir() if p.is_dir() and not p.name.startswith(".")):
        if wanted and directory.name not in wanted:
            continue
        if not (directory / CONFIG_FILE).exists():
            continue  # Triton can auto-complete some backends' configs; nothing here to lint
        try:
            sources.append(read_model_directory(directory))
        except ConfigSyntaxError as exc:
            errors.append(exc)
    return sources, errors


def source_from_server(name: str, config_json: dict[str, Any], origin: str) -> ModelSource:
    """A live config (the server's effective JSON) as a ModelSource.

    Fields a newer server knows and this tritonclient does not are ignored rather than fatal.
    """
    config = model_config_pb2().ModelConfig()
    try:
        json_format.ParseDict(config_json, config, ignore_unknown_fields=True)
    except json_format.ParseError as exc:
        raise ConfigSyntaxError(origin, None, None, str(exc)) from None
    return ModelSource(name, config, origin)
