"""What a soak ran against (its "server identity"), and every difference between two of them.

An identity (format IDENTITY_FORMAT) holds the server version; every model the server holds,
whatever the run's scope and decoupled ones included (the leak rule measures the whole server),
each with its READY versions, the SHA-256 of its live config and a digest per file
(soak/model_files.py) where the model repository is a directory on this host (a launched server,
or `--triton-model-repository` given), else why its files were not read; how the server was
started (launcher, image, arguments) where known; and the rate the soak offers each model
(`soak_rates_infer_s`, the unary soak) or the streams it holds open on each (`soak_streams`, the
stream soak).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..server.models import config_digest
from .model_files import model_files

if TYPE_CHECKING:
    from ..server.under_test import ServerUnderTest

IDENTITY_FORMAT = 2
RATE_TOLERANCE = 1e-6  # relative: a rate read back from JSON is the same rate
DIFFERENCES_SHOWN = 5  # file differences named per model; the rest are counted
UNREAD = "its files cannot be compared: they were not read"


def server_identity(client: Any, repository: Path | None, unread: str | None, launch: dict[str, Any] | None,
                    rates: dict[str, float], streams: dict[str, int] | None = None) -> dict[str, Any]:
    """The identity of the server `client` talks to. `repository`: its model repository on this
    host, or None with `unread` saying why not; `rates`: the soak's rate per model (infer/s);
    `streams`: the stream soak's concurrent streams per model."""
    held: dict[str, set[str]] = {}
    for entry in client.repository_index():
        versions = held.setdefault(str(entry.get("name")), set())
        if entry.get("state") == "READY":
            versions.add(str(entry.get("version", "")))
    models = {}
    for model, versions in sorted(held.items()):
        models[model] = {"ready_versions": sorted(versions)}
        if versions:
            models[model]["config_sha256"] = config_digest(client.model_config(model))
            models[model] |= _files(repository, unread, model, versions)
    return {"identity_format": IDENTITY_FORMAT, "server_version": client.server_metadata().get("version"),
            "models": models, "launch": launch, "soak_rates_infer_s": dict(rates), "soak_streams": dict(streams or {})}


def identity_of(target: ServerUnderTest, settings: Any, rates: dict[str, float],
                streams: dict[str, int] | None = None) -> dict[str, Any]:
    """The identity of `target` (a Target), its launch arguments redacted as the report is."""
    launcher = target.launcher
    repository = launcher.model_repository or settings.triton_model_repository
    unread = None if repository else (f"the {launcher.name} server's model repository is not on this host "
                                      "(give --triton-model-repository=DIR where it is)")
    launch = settings.redactor().value(launcher.launch_identity)
    return server_identity(target.client, Path(repository) if repository else None, unread, launch, rates, streams)


def _files(repository: Path | None, unread: str | None, model: str, versions: set[str]) -> dict[str, Any]:
    if repository is None:
        return {"files": None, "files_unread": unread}
    try:
        return {"files": model_files(repository / model, versions)}
    except OSError as exc:
        why = f"{exc.filename}: {exc.strerror}" if exc.filename and exc.strerror else str(exc)
        return {"files": None, "files_unread": why}


def differences(then: dict[str, Any], here: dict[str, Any]) -> list[str]:
    """Every difference between the identity `then` (the evidence's) and `here` (this run's), each
    naming what differs; an identity of another format is one difference asking for a new soak."""
    made = then.get("identity_format", 1)
    if made != IDENTITY_FORMAT:
        return [f"its server identity is format {made}, this version of pytest-triton-ready compares format "
                f"{IDENTITY_FORMAT} (every model's file digests, the launch arguments and image, the offered "
                "rate): re-soak with this version to make new evidence"]
    problems = []
    if then.get("server_version") != here.get("server_version"):
        problems.append(f"server version {then.get('server_version')} there, {here.get('server_version')} here")
    problems += _launch(then.get("launch"), here.get("launch"))
    models_then, models_here = then.get("models") or {}, here.get("models") or {}
    unread: dict[str, list[str]] = {}  # one line per reason files were not read, naming its models
    for model in sorted(set(models_then) | set(models_here)):
        if model not in models_then:
            problems.append(f"model {model}: held by this server, not in the evidence")
        elif model not in models_here:
            problems.append(f"model {model}: in the evidence, not held by this server")
        else:
            for problem in _model(models_then[model], models_here[model]):
                if problem.startswith(UNREAD):
                    unread.setdefault(problem, []).append(model)
                else:
                    problems.append(f"model {model}: {problem}")
    problems += [f"model{'s' if len(names) > 1 else ''} {', '.join(names)}: {problem}"
                 for problem, names in unread.items()]
    return (problems + _rates(then.get("soak_rates_infer_s") or {}, here.get("soak_rates_infer_s") or {}, "infer/s")
            + _rates(then.get("soak_streams") or {}, here.get("soak_streams") or {}, "streams"))


def _launch(then: dict[str, Any] | None, here: dict[str, Any] | None) -> list[str]:
    if then is None and here is None:
        return []
    if then is None or here is None:
        known, unknown = ("there", "here") if here is None else ("here", "there")
        launched = (then or here or {}).get("launcher")
        return [f"launch arguments: known {known} ({launched} server), not {unknown} (attached server), "
                "so the two launches cannot be compared"]
    problems = []
    if then.get("image") != here.get("image"):
        problems.append(f"image {then.get('image')} there, {here.get('image')} here")
    args_then, args_here = list(then.get("arguments") or []), list(here.get("arguments") or [])
    if args_then != args_here:
        only_then = [a for a in args_then if a not in args_here]
        only_here = [a for a in args_here if a not in args_then]
        shown = (f"{' '.join(only_then) or 'none'} only there, {' '.join(only_here) or 'none'} only here"
                 if only_then or only_here else "the same arguments in another order")
        problems.append(f"launch arguments differ: {shown}")
    return problems


def _model(then: dict[str, Any], here: dict[str, Any]) -> list[str]:
    if then.get("ready_versions") != here.get("ready_versions"):
        return [f"READY versions {then.get('ready_versions')} there, {here.get('ready_versions')} here"]
    if not here.get("ready_versions"):
        return []
    problems = []
    if then.get("config_sha256") != here.get("config_sha256"):
        problems.append(f"its effective config differs (sha256 {str(then.get('config_sha256'))[:12]} there, "
                        f"{str(here.get('config_sha256'))[:12]} here)")
    files_then, files_here = then.get("files"), here.get("files")
    if files_then is None or files_here is None:
        side, why = ("there", then.get("files_unread")) if files_then is None else ("here", here.get("files_unread"))
        return [*problems, f"{UNREAD} {side} ({why or 'no reason recorded'})"]
    changed = []
    for path in sorted(set(files_then) | set(files_here)):
        if path not in files_then:
            changed.append(f"file {path} added (not in the evidence)")
        elif path not in files_here:
            changed.append(f"file {path} removed (in the evidence, not here)")
        elif files_then[path] != files_here[path]:
            changed.append(f"file {path} changed (digest {_short(files_then[path])} there, "
                           f"{_short(files_here[path])} here)")
    if len(changed) > DIFFERENCES_SHOWN:
        changed = [*changed[:DIFFERENCES_SHOWN], f"and {len(changed) - DIFFERENCES_SHOWN} more files differ"]
    return problems + changed


def _short(digest: str) -> str:
    kind, _, value = digest.partition(":")
    return f"{kind}:{value[:12]}"


def _rates(then: dict[str, float], here: dict[str, float], unit: str) -> list[str]:
    """Each model this run would soak that the evidence soaked less hard (or not at all)."""
    problems = []
    for model, planned in sorted(here.items()):
        soaked = then.get(model)
        if soaked is None:
            problems.append(f"model {model}: not soaked there, this run plans {planned:g} {unit}")
        elif soaked < planned * (1 - RATE_TOLERANCE):
            problems.append(f"model {model}: soaked at {soaked:g} {unit} there, below this run's planned "
                            f"soak rate of {planned:g} {unit}")
    return problems
