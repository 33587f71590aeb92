"""SEC-1 "restricted APIs need credentials" on a deployment: every API category probed without
credentials over HTTP and gRPC (restricted.py), each required one judged (checks/test_security.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..server.api_categories import API_CATEGORIES, REQUIRED_BY_DEFAULT
from .restricted import OPEN, RESTRICTED, exposures, probe_grpc, probe_http
from .tls import ssl_context

if TYPE_CHECKING:
    from ..record.recorder import CheckRecorder
    from ..server.under_test import ServerUnderTest


def required_apis(settings: Any) -> list[str]:
    """`security.restricted_apis`, or the categories required by default."""
    return settings.section_model("security").restricted_apis or list(REQUIRED_BY_DEFAULT)


def unknown_categories(required: list[str]) -> list[str]:
    """The names in `required` that are no Triton API category."""
    return [api for api in required if api not in API_CATEGORIES]


def answered(probes: dict[str, list[Any]]) -> bool:
    """Whether any probe of a protocol got an answer (open or refused) rather than none."""
    return any(a.state in (OPEN, RESTRICTED) for answers in probes.values() for a in answers)


def restriction_fix(open_required: list[str]) -> str:
    apis = ",".join(open_required)
    return (f"Start tritonserver with --http-restricted-api={apis}:<header>=<secret> and "
            f"--grpc-restricted-protocol={apis}:<header>=<secret>, and give the header only to "
            "operators (gRPC clients send it as triton-grpc-protocol-<header>).")


def judge_restricted_apis(check: CheckRecorder, target: ServerUnderTest, settings: Any) -> None:
    """Each required API category refuses a caller without credentials over every protocol it
    answers on; one that answers over no protocol is not judged restricted (evidence, and
    INCOMPLETE unless another failed); HTTP answering no probe is INCOMPLETE."""
    required = required_apis(settings)
    for api in unknown_categories(required):
        check.finding(f"security.restricted_apis names {api!r}, which is not a Triton API category "
                      f"(known: {', '.join(API_CATEGORIES)})", rule="security.restricted_apis")
    timeout = settings.triton_request_timeout
    http = probe_http(target.endpoints.http_url, timeout, ssl_context(settings))
    grpc = probe_grpc(target.endpoints.grpc_url, timeout)
    found = exposures(http, grpc)
    for category, exposure in found.items():
        check.evidence(f"{category} probes", "\n".join(a.line() for a in exposure.answers))
        if category not in required:
            check.measure(f"{category} API", exposure.state(), finding=None)
            continue
        silent = exposure.unanswered_protocols()
        if silent and exposure.judged_state() is None:
            check.evidence(f"{category} API not judged", f"no answer over {' and '.join(p.upper() for p in silent)}: "
                           "an API that does not answer may be restricted or down; its restriction is not shown")
        check.measure(f"{category} API", exposure.judged_state(), threshold=RESTRICTED, comparison="==",
                      finding=f"the {category} API answers without credentials over "
                              f"{' and '.join(p.upper() for p in exposure.open_protocols())}")
    if not answered(grpc):
        check.finding(f"gRPC at {target.endpoints.grpc_url} did not answer: its APIs were not probed", severity="warning")
    if not answered(http):
        check.incomplete(f"HTTP at {target.endpoints.http_url} did not answer the probes")
    open_required = [c for c in required if c in found and found[c].state() == OPEN]
    if open_required:
        check.recommend(restriction_fix(open_required))
