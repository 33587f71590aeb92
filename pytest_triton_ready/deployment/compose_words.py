"""What a compose service lacks of a Kubernetes workload, and each rule's message and fix in compose
words (judgement.worded): the fix names the compose field to set and the value, in compose's
units (`stop_grace_period: 36s`, `deploy.resources.limits.memory: 721m`)."""

from __future__ import annotations

ABSENT = {
    "livenessProbe": (
        "a liveness probe",
        "a healthcheck is one probe, and Docker restarts no container for failing it (restart: acts on exits alone; "
        "moby/moby#28400), so no probe restarts a hung server and none can restart a loading one: the healthcheck is "
        "judged as the readiness and startup probe"),
    "lifecycle.preStop": (
        "a preStop delay",
        "nothing takes a compose container out of the traffic before its stop signal (clients reach it by its service "
        "name or a published port until it stops), so no delay keeps the requests that arrive after SIGTERM"),
    "/spec.replicas": (
        "a PodDisruptionBudget",
        "nothing drains a compose host container by container: `docker compose down`, a restart of the Docker "
        "daemon or of the host stops every container of the service at once, however many deploy.replicas it runs"),
    "/spec.strategy": (
        "a rolling update",
        "`docker compose up` stops a changed service's containers and starts new ones, and deploy.update_config is "
        "read by Docker Swarm, not by docker compose (docker/compose#13149): every change is an outage for as long "
        "as the models take to load"),
    "/HorizontalPodAutoscaler": (
        "an autoscaler",
        "a compose service runs the containers deploy.replicas says, and nothing scales it on a metric"),
}


def absent_fields(base: str) -> dict[str, str]:
    """Where each rule that is NOT APPLICABLE to compose would look in the compose file."""
    return {"livenessProbe": f"{base}.healthcheck", "lifecycle.preStop": base, "/spec.replicas": f"{base}.deploy.replicas",
            "/spec.strategy": f"{base}.deploy.update_config", "/HorizontalPodAutoscaler": f"{base}.deploy.replicas"}


def literal(text: str) -> str:
    """`text` as a template that formats to itself."""
    return text.replace("{", "{{").replace("}", "}}")


def compose_words(fields: dict[str, str], base: str, port: str, user: str | None, built: str | None) -> dict[str, str]:
    """The rules' wording for one service: `fields` names where each setting is read (so a fix names
    mem_limit where the file uses it), `port` the server's HTTP port, `user` the service's user,
    `built` the build context of a service that names no image."""
    def own(normalized: str) -> str:
        return literal(fields[normalized].removeprefix(base + "."))

    memory, reservation, cpus = (own("resources.limits.memory"), own("resources.requests.memory"),
                                 own("resources.limits.cpu"))
    url = literal(f"http://localhost:{port}/v2/health/ready")
    words = {
        "readiness-path": "the healthcheck asks {path}, the rule is /v2/health/ready or /v2/models/M/ready; Docker "
                          "marks the container unhealthy {detection:g} s (interval x retries) after it stops being "
                          "ready{stubs}",
        "readiness-path:none": "no healthcheck: Docker says the container is running, never whether its models are "
                               "ready, so neither `docker compose up --wait` nor a service that depends on it with "
                               "condition service_healthy can wait for them",
        "readiness-path:fix": f"healthcheck.test: [CMD, curl, --fail, -sS, {url}] (without --fail curl exits 0 on any "
                              "HTTP answer)",
        "startup-budget:none": "no healthcheck: nothing says when a start has taken too long, and `docker compose up "
                               "--wait` cannot wait for the models",
        "startup-budget:fix-none": f"a healthcheck on {url} with a start_period above the measured start-to-ready time",
        "startup-budget:formula": "healthcheck: start_period {initial:g} s + retries {retries:g} x interval {period:g} "
                                  "s = {budget:g} s",
        "startup-budget:fix": "healthcheck.start_period: {start_period}s or more (retries x interval count from its "
                              "end), so the container does not turn unhealthy while its models load: `docker compose "
                              "up --wait` fails on an unhealthy container, and so does every service that waits for "
                              "it with condition service_healthy",
        "grace-period:name": "stop_grace_period",
        "grace-period-drain": "{grace}; measured drain {drain:.1f} s + margin {margin:g} s = {needed:.1f} s needed",
        "grace-period-drain:fix": "stop_grace_period: {seconds}s, so Docker does not SIGKILL (exit code 137) a server "
                                  "still draining",
        "grace-period-exit-timeout": "{grace}; --exit-timeout-secs {timeout:g} s{default}, the rule is more than that",
        "grace-period-exit-timeout:fix": "stop_grace_period: {seconds}s, or a lower --exit-timeout-secs: Docker "
                                         "SIGKILLs (exit code 137) a server that uses its whole exit timeout, with "
                                         "requests in flight",
        "memory-limit:none": "no memory limit: the container can take the host's memory, and the kernel's OOM killer "
                             "then chooses among every process of the host",
        "memory-limit:fix": memory + ": {mib}m or more, else the kernel OOM-kills the server (exit code 137) at its "
                                     "peak",
        "memory-limit:fix-unmeasured": f"{memory} from a measured peak: run PERF-3's soak",
        "memory-request:fix": f"{reservation} at most {memory} (Docker refuses a reservation above the limit)",
        "cpu-limit:fix": cpus + ": {cores:.1f} or more, or state the capacity measured inside this limit",
        "dev-shm:field": "pod:shm_size",
        "dev-shm:none": "python backend models ({models}) and no shm_size: /dev/shm is Docker's default, 64 MiB",
        "dev-shm:fix": "shm_size: {minimum:g}m or more (or ipc: host): the python backend's stubs exchange every "
                       "tensor through /dev/shm, and Docker's default of 64 MiB is overflowed by large requests",
        "gpu-limit": "GPUs reserved: {gpus}; KIND_GPU models and the GPUs they reference: {models}",
        "gpu-limit:fix": "deploy.resources.reservations.devices: [{{driver: nvidia, count: {needed}, capabilities: "
                         "[gpu]}}]: without it the container sees no GPU and KIND_GPU models fail to load",
        "run-as-non-root": f"user {literal(user)}" if user is not None else "no user: the container runs as its image's user, "
                                                                   "root in Triton's images",
        "run-as-non-root:fix": 'user: "1000:1000" (triton-server in Triton\'s images): a process that breaks out of '
                               "Triton should not be root",
        "model-repository-read-only:fix": "volumes[{number}]: end it with :ro (read_only: true in the long syntax): "
                                          "the server only reads its repository, and a writable one lets a "
                                          "compromised container change the models it loads",
        "model-repository-read-only:fix-none": "mount the model repository from a volume, ending with :ro",
    }
    if built is not None:
        words["image-pinned:built"] = (f"the service names no image, only build: {literal(built)}: what is pinned or not is "
                                       "the FROM line of its Dockerfile, which the compose file does not hold")
    return words
