"""Where the fleet's replicas come from (`resolve_fleet`): the YAML list, a command, or a Kubernetes
Service. Replicas from a Kubernetes Service: the ready addresses of its Endpoints, read through the
official `kubernetes` client (`pip install 'pytest-triton-ready[kubernetes]'`).

This is the real code path. It was exercised here only against the client's own model objects
(V1Endpoints, V1EndpointSubset, ...) returned by a stand-in for CoreV1Api: no cluster was reachable
when it was written.
"""

from __future__ import annotations

from typing import Any

from .targets import (
    DiscoveryError,
    Fleet,
    FleetSection,
    KubernetesDiscovery,
    Replica,
    replica_from_entry,
    replica_from_url,
    urls_from_command,
)


def core_api(discovery: KubernetesDiscovery) -> Any:
    """A CoreV1Api from ~/.kube/config (or the pod's service account with `in_cluster`)."""
    try:
        from kubernetes import client, config
    except ImportError:
        raise DiscoveryError("fleet.kubernetes needs the kubernetes client: pip install "
                             "'pytest-triton-ready[kubernetes]'") from None
    try:
        if discovery.in_cluster:
            config.load_incluster_config()
        else:
            config.load_kube_config()
    except Exception as exc:  # ConfigException and file errors: one line either way
        raise DiscoveryError(f"fleet.kubernetes: no usable Kubernetes configuration: {exc}") from None
    return client.CoreV1Api()


def _port(ports: list[Any], wanted: str) -> int | None:
    for port in ports or []:
        if str(port.name) == wanted or str(port.port) == wanted:
            return int(port.port)
    return None


def kubernetes_replicas(discovery: KubernetesDiscovery, section: FleetSection, api: Any = None) -> list[Replica]:
    """One Replica per ready address of the Service's Endpoints; the pod's name names it."""
    api = api if api is not None else core_api(discovery)
    try:
        endpoints = api.read_namespaced_endpoints(discovery.service, discovery.namespace)
    except Exception as exc:  # ApiException (404, 403) or a connection error
        status = getattr(exc, "status", None)
        reason = getattr(exc, "reason", None) or str(exc).splitlines()[0]
        raise DiscoveryError(f"fleet.kubernetes: cannot read Endpoints {discovery.namespace}/{discovery.service}: "
                             f"{status or ''} {reason}".replace("  ", " ")) from None
    replicas: list[Replica] = []
    not_ready = 0
    for subset in endpoints.subsets or []:
        http = _port(subset.ports, discovery.http_port)
        if http is None:
            raise DiscoveryError(f"fleet.kubernetes: Endpoints {discovery.namespace}/{discovery.service} have no "
                                 f"port {discovery.http_port!r} (ports: "
                                 f"{', '.join(f'{p.name}={p.port}' for p in subset.ports or [])})")
        grpc = _port(subset.ports, discovery.grpc_port) or section.grpc_port
        metrics = _port(subset.ports, discovery.metrics_port) or section.metrics_port
        not_ready += len(subset.not_ready_addresses or [])
        for address in subset.addresses or []:
            host = address.ip
            shown = f"[{host}]" if ":" in host else host
            pod = address.target_ref.name if address.target_ref is not None else None
            replicas.append(Replica(pod or f"{shown}:{http}", f"http://{shown}:{http}", f"{shown}:{grpc}",
                                    f"http://{shown}:{metrics}/metrics", 1.0, section.kill_command,
                                    section.restore_command))
    if not replicas:
        raise DiscoveryError(f"fleet.kubernetes: Endpoints {discovery.namespace}/{discovery.service} list no ready "
                             f"address ({not_ready} not ready)")
    return replicas


def resolve_fleet(section: FleetSection, entry_http_url: str, entry_grpc_url: str,
            kubernetes_api: Any = None) -> Fleet | None:
    """The fleet the section describes, or None when it names no replicas at all."""
    if section.replicas:
        replicas = [replica_from_url(r, section) if isinstance(r, str) else replica_from_entry(r, section)
                    for r in section.replicas]
        source = "fleet.replicas"
    elif section.replicas_command:
        replicas = [replica_from_url(u, section) for u in urls_from_command(section.replicas_command)]
        source = f"fleet.replicas_command ({section.replicas_command})"
    elif section.kubernetes:
        replicas = kubernetes_replicas(section.kubernetes, section, api=kubernetes_api)
        source = f"Kubernetes Endpoints {section.kubernetes.namespace}/{section.kubernetes.service}"
    else:
        return None
    names = [r.name for r in replicas]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise DiscoveryError(f"{source}: replica names must differ; {', '.join(duplicates)} repeats")
    return Fleet(entry_http_url, entry_grpc_url, replicas, source, section)
