"""Docker Compose: a file whose top level holds a `services:` mapping (found by that, not by its name;
no Kubernetes schema applies to it) gives one Triton container per service whose command,
entrypoint or image runs tritonserver, normalized into the container view the rules read, with
every field named where the compose file holds it (`services.NAME.deploy.resources.limits.memory`).
The healthcheck stands in for the readiness and startup probes (its test's URL path, interval,
retries, start_period); stop_grace_period (compose's default 10 s) for the grace period; shm_size,
ipc: host or a tmpfs volume at /dev/shm for the /dev/shm volume (Docker's default is 64 MiB); the
GPU device reservations, `gpus:` or the nvidia runtime for the GPU limit. What compose has no
equivalent of (a liveness probe, a preStop delay, a PodDisruptionBudget, a rolling update, an
autoscaler) is in compose_words.ABSENT, and its rules are NOT APPLICABLE, saying why."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from .compose_gpus import compose_gpus
from .compose_values import Service, split_words
from .compose_words import ABSENT, absent_fields, compose_words
from .judgement import flag_value
from .reading import DeploymentError, Document, TritonContainer, is_triton

COMPOSE = "Compose"
DEFAULT_STOP_GRACE_S = 10.0  # docker compose's stop_grace_period where the service leaves it out
HEALTHCHECK_DEFAULTS = {"interval": 30.0, "retries": 3}  # Docker's, where a healthcheck leaves them out (or 0)
IGNORES_STATUS = " (curl without --fail: any HTTP answer passes)"
_URL_PATH = re.compile(r"(?:https?://[^/\s'\"]+|(?:^|[\s'\"=@])[\w.\-]+:\d+)(/[^\s'\"|;&)]*)")
_SHELL_SCRIPT = re.compile(r"-\w*c")
_CURL_FAIL = re.compile(r"--fail(?:-with-body)?|-[a-zA-Z]*f[a-zA-Z]*")


def is_compose(document: Document) -> bool:
    """A compose file: a top-level `services` key, and neither apiVersion nor kind."""
    body = document.body
    return "services" in body and "apiVersion" not in body and "kind" not in body


def compose_containers(documents: list[Document]) -> list[TritonContainer]:
    """The Triton containers of every compose file among the documents."""
    found = []
    for document in documents:
        if not is_compose(document):
            continue
        services = document.body["services"]
        if not isinstance(services, dict):
            raise DeploymentError(f"{document.path} (compose): field services: {json.dumps(services, default=str)} "
                                  "is not a mapping (service name: service)")
        for name, body in services.items():
            container = service_container(document, Service(document.path, str(name), body))
            if container is not None:
                found.append(container)
    return found


def _command(service: Service) -> tuple[list[str], dict[str, str]]:
    """The service's command line (entrypoint, then command) as words with each word's field; the
    script of a shell (`sh -c "tritonserver ..."`) that runs tritonserver is split into its words."""
    words: list[str] = []
    fields: dict[str, str] = {}
    for key in ("entrypoint", "command"):
        listed = isinstance(service.get(key), list)
        for number, word in enumerate(service.words(key) or []):
            script = bool(words) and _SHELL_SCRIPT.fullmatch(words[-1]) and "tritonserver" in word
            for part in split_words(word) if script else [word]:
                fields[f"args[{len(words)}]"] = f"{service.base}.{key}" + (f"[{number}]" if listed else "")
                words.append(part)
    given = "entrypoint" if service.get("command") is None and service.get("entrypoint") is not None else "command"
    fields["args"] = f"{service.base}.{given}"
    return words, fields


def _url_path(tokens: list[str]) -> str | None:
    """The path of the first URL the test asks (http://HOST/PATH, HOST:PORT/PATH)."""
    return next((match.group(1) for token in tokens for match in [_URL_PATH.search(token)] if match), None)


def _ignores_status(tokens: list[str]) -> bool:
    """Whether the test is a curl that exits 0 on any HTTP answer: no --fail, no check of %{http_code}."""
    if "curl" not in {Path(token).name for token in tokens}:
        return False
    return not any(_CURL_FAIL.fullmatch(token) for token in tokens) and not any("http_code" in t for t in tokens)


def _probe(service: Service) -> dict[str, Any] | None:
    """The healthcheck as the probe the rules read: its test's URL path, and Docker's interval,
    retries and start_period (a disabled healthcheck or test NONE: no probe)."""
    check = service.mapping("healthcheck")
    for unjudged in ("timeout", "start_interval"):
        service.seconds(f"healthcheck.{unjudged}")
    if not check or service.typed("healthcheck.disable", (bool,), "true or false"):
        return None
    words = service.words("healthcheck.test") or []
    if isinstance(service.get("healthcheck.test"), list) and words and words[0] not in ("CMD", "CMD-SHELL", "NONE"):
        raise service.error("healthcheck.test", service.get("healthcheck.test"), "does not start with CMD, CMD-SHELL "
                                                                                 "or NONE, which docker compose refuses")
    if words[:1] == ["NONE"]:
        return None
    tokens = [token for word in words for token in split_words(word)]
    probe: dict[str, Any] = {
        "periodSeconds": service.seconds("healthcheck.interval") or HEALTHCHECK_DEFAULTS["interval"],
        "failureThreshold": service.count("healthcheck.retries") or HEALTHCHECK_DEFAULTS["retries"],
        "initialDelaySeconds": service.seconds("healthcheck.start_period") or 0.0}
    path = _url_path(tokens)
    if path:
        probe["httpGet"] = {"path": path + (IGNORES_STATUS if _ignores_status(tokens) else "")}
    return probe


def _resources(service: Service, env: list[dict[str, str]], fields: dict[str, str]) -> dict[str, dict[str, Any]]:
    """The limits and the memory reservation, from deploy.resources or the service-level mem_limit,
    mem_reservation and cpus (docker compose refuses the two set to different values)."""
    for part in ("deploy", "deploy.resources", "deploy.resources.limits", "deploy.resources.reservations"):
        service.mapping(part)
    memory, memory_at = service.either("deploy.resources.limits.memory", "mem_limit", service.size)
    request, request_at = service.either("deploy.resources.reservations.memory", "mem_reservation", service.size)
    cpus, cpus_at = service.either("deploy.resources.limits.cpus", "cpus", service.number)
    gpus, gpus_at = compose_gpus(service, env)
    for normalized, at in (("limits.memory", memory_at), ("requests.memory", request_at), ("limits.cpu", cpus_at),
                           ("limits.nvidia.com/gpu", gpus_at)):
        fields[f"resources.{normalized}"] = f"{service.base}.{at}"
    limits = {k: v for k, v in (("memory", memory), ("cpu", cpus or None), ("nvidia.com/gpu", gpus)) if v is not None}
    return {"limits": limits, "requests": {"memory": request} if request is not None else {}}


def _environment(service: Service, fields: dict[str, str]) -> list[dict[str, str]]:
    """The environment as a container's env (NAME=VALUE entries, or a mapping); a name without a
    value, which compose takes from the shell that runs it, is left out."""
    environment = service.typed("environment", (list, dict), "a list of NAME=VALUE or a mapping")
    listed = isinstance(environment, list)
    pairs = [str(item).partition("=") for item in environment] if listed else [
        (str(k), "=" if v is not None else "", "" if v is None else str(v)) for k, v in (environment or {}).items()]
    env = []
    for number, (name, equals, value) in enumerate(pairs):
        if equals:
            fields[f"env[{len(env)}]"] = f"{service.base}.environment" + (f"[{number}]" if listed else f".{name}")
            env.append({"name": name, "value": value})
    return env


def _mounts(service: Service, fields: dict[str, str]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The volumes as mounts (mountPath, readOnly from :ro or read_only), and the memory-backed ones
    (tmpfs, the host's /dev/shm) as the pod volumes the /dev/shm rule reads."""
    mounts: list[dict[str, Any]] = []
    volumes: list[dict[str, Any]] = []
    for number, volume in enumerate(service.items("volumes")):
        at = f"volumes[{number}]"
        fields[f"volumeMounts[{number}]"] = fields[f"volumeMounts[{number}].readOnly"] = f"{service.base}.{at}"
        if isinstance(volume, str):
            parts = volume.split(":")
            source, target, modes = (None, parts[0], []) if len(parts) == 1 else (parts[0], parts[1], parts[2:])
            modes = [mode for part in modes for mode in part.split(",")]
            mount = {"name": source or at, "mountPath": target}
            if "ro" in modes or "rw" in modes:
                mount["readOnly"] = "ro" in modes
        elif isinstance(volume, dict):
            source, target = service.text(f"{at}.source"), service.text(f"{at}.target")
            if not target:
                raise service.error(at, volume, "has no target (the path inside the container)")
            mount = {"name": source or at, "mountPath": target}
            read_only = service.typed(f"{at}.read_only", (bool,), "true or false")
            if read_only is not None:
                mount["readOnly"] = read_only
            fields[f"volumeMounts[{number}].readOnly"] = f"{service.base}.{at}.read_only"
            if service.text(f"{at}.type") == "tmpfs":
                size = service.size(f"{at}.tmpfs.size")
                volumes.append({"name": mount["name"], "emptyDir": {"medium": "Memory", **(
                    {"sizeLimit": size} if size else {})}})
                fields[f"pod:volumes[{len(volumes) - 1}].emptyDir"] = f"{service.base}.{at}"
        else:
            raise service.error(at, volume, "is not a volume (SOURCE:TARGET[:MODE], or a mapping)")
        if source == "/dev/shm" and target.rstrip("/") == "/dev/shm":
            volumes.append({"name": mount["name"], "emptyDir": {"medium": "Memory"}})
            fields[f"pod:volumes[{len(volumes) - 1}].emptyDir"] = f"{service.base}.{at}"
        mounts.append(mount)
    fields["volumeMounts"] = f"{service.base}.volumes"
    return mounts, volumes


def _shm(service: Service, mounts: list[dict], volumes: list[dict], fields: dict[str, str]) -> None:
    """/dev/shm: a volume mounted there, else the host's (ipc: host), else a tmpfs of shm_size; with
    none of them it is Docker's 64 MiB default, and no volume is mounted there."""
    size, ipc = service.size("shm_size"), service.text("ipc")
    if any(mount["mountPath"].rstrip("/") == "/dev/shm" for mount in mounts) or (ipc != "host" and size is None):
        return
    name, empty = ("ipc: host", {"medium": "Memory"}) if ipc == "host" else (
        "shm_size", {"medium": "Memory", "sizeLimit": size})
    mounts.append({"name": name, "mountPath": "/dev/shm"})
    volumes.append({"name": name, "emptyDir": empty})
    fields[f"pod:volumes[{len(volumes) - 1}].emptyDir"] = f"{service.base}.{'ipc' if ipc == 'host' else 'shm_size'}"


def _user(service: Service) -> tuple[dict[str, Any], str | None]:
    """The securityContext the user gives (UID, or a name: root is 0), and the user as written."""
    user = service.typed("user", (str, int), "a user (NAME or UID, with :GROUP)")
    if user is None:
        return {}, None
    uid = str(user).split(":", 1)[0]
    return {"runAsUser": int(uid) if uid.isdigit() else 0 if uid == "root" else uid}, str(user)


def _built(service: Service, image: str | None) -> str | None:
    """The build context of a service that names no image; None where it names one."""
    build = service.typed("build", (str, dict), "a build context (a path, or a mapping)")
    if image:
        return None
    if build is None:
        raise DeploymentError(f"{service.path} (compose): field {service.base}: names neither an image nor a build, "
                              "which docker compose refuses")
    return build if isinstance(build, str) else service.text("build.context") or "."


def service_container(document: Document, service: Service) -> TritonContainer | None:
    """One service as a Triton container; None where it does not run tritonserver."""
    args, fields = _command(service)
    image = service.text("image")
    if not is_triton({"args": args, "image": image or ""}):
        return None
    base, built = service.base, _built(service, image)
    env = _environment(service, fields)
    container: dict[str, Any] = {"image": image or "", "args": args, "env": env,
                                 "resources": _resources(service, env, fields)}
    probe = _probe(service)
    if probe is not None:
        container["readinessProbe"], container["startupProbe"] = probe, dict(probe)
    mounts, volumes = _mounts(service, fields)
    _shm(service, mounts, volumes, fields)
    container["volumeMounts"] = mounts
    context, user = _user(service)
    if context:
        container["securityContext"] = context
    pod: dict[str, Any] = {"volumes": volumes}
    grace = service.seconds("stop_grace_period")
    if grace is not None:
        pod["terminationGracePeriodSeconds"] = grace
    fields.update({"image": f"{base}.{'build' if built is not None else 'image'}", "readinessProbe": f"{base}.healthcheck",
                   "readinessProbe.httpGet.path": f"{base}.healthcheck.test", "startupProbe": f"{base}.healthcheck",
                   "pod:terminationGracePeriodSeconds": f"{base}.stop_grace_period", "securityContext": f"{base}.user",
                   "pod:securityContext": f"{base}.user", **absent_fields(base)})
    replicas = service.either("deploy.replicas", "scale", service.count)[0] or 1
    workload = {"kind": "ComposeService", "metadata": {"name": service.name}, "spec": {"replicas": replicas}}
    port = flag_value(args, "--http-port") or "8000"
    return TritonContainer(document, pod, container, base, args, source=COMPOSE, fields=fields, absent=dict(ABSENT),
                           words=compose_words(fields, base, port, user, built), workload=workload,
                           defaults={"terminationGracePeriodSeconds": DEFAULT_STOP_GRACE_S})
