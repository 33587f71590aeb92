"""CFG-3: what a model's version_policy says it serves, and how that compares with the server."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..lint.modelconfig import ModelSource
from ..lint.sources import DeploymentConfigs

if TYPE_CHECKING:
    from ..record.recorder import CheckRecorder


def describe_policy(config) -> str:
    """The policy as one phrase: 'latest 2', 'all', 'specific [1, 3]'."""
    policy = config.version_policy
    choice = policy.WhichOneof("policy_choice")
    if choice == "all":
        return "all"
    if choice == "specific":
        return f"specific {sorted(policy.specific.versions)}"
    return f"latest {policy.latest.num_versions or 1}"


def expected_versions(config, on_disk: list[int]) -> list[int] | None:
    """The versions the policy selects from those on disk; None when that cannot be known
    (no files: 'latest' and 'all' depend on what is on disk)."""
    policy = config.version_policy
    choice = policy.WhichOneof("policy_choice")
    if choice == "specific":
        return sorted(policy.specific.versions)
    if not on_disk:
        return None
    if choice == "all":
        return sorted(on_disk)
    return sorted(on_disk)[-(policy.latest.num_versions or 1):]


def servable_count(config) -> int | None:
    """How many versions the policy can serve at once; None for 'all' (as many as exist)."""
    policy = config.version_policy
    choice = policy.WhichOneof("policy_choice")
    if choice == "all":
        return None
    if choice == "specific":
        return len(set(policy.specific.versions))
    return policy.latest.num_versions or 1


def served_by_index(index: list[dict[str, Any]]) -> dict[str, list[int]]:
    """Each model's READY numeric versions in the repository index, sorted."""
    served: dict[str, list[int]] = {}
    for entry in index:
        if entry.get("state") == "READY" and str(entry.get("version", "")).isdigit():
            served.setdefault(entry["name"], []).append(int(entry["version"]))
    return {model: sorted(versions) for model, versions in served.items()}


def policy_problems(source: ModelSource, versions: list[int]) -> list[tuple[str, Any]]:
    """(finding, value) for each way a model's policy and the versions it serves disagree: the
    policy left out of the file, the versions it selects not the ones served, or more served at
    once than the policy allows."""
    model, config = source.name, source.config
    policy = describe_policy(config)
    problems: list[tuple[str, Any]] = []
    if source.wrote("version_policy") is False:
        problems.append((f"{model}: version_policy is not written, so Triton's default (latest 1) decides which "
                         "versions serve; write the policy so a rollout or rollback is a reviewed change",
                         "version_policy left out"))
    expected = expected_versions(config, source.versions_on_disk)
    if expected is not None and versions != expected:
        problems.append((f"{model}: the policy {policy} selects versions {expected} (on disk: "
                         f"{source.versions_on_disk or 'unknown'}) but the server serves {versions or 'none'}",
                         versions))
    elif expected is None and len(versions) > (servable_count(config) or len(versions)):
        problems.append((f"{model}: the policy {policy} allows {servable_count(config)} version(s) at once but "
                         f"the server serves {versions}", versions))
    return problems


def judge_version_policy(check: CheckRecorder, found: DeploymentConfigs, index: list[dict[str, Any]],
                         rollouts: dict[str, str]) -> None:
    """CFG-3: every config writes its version_policy out, the server serves exactly the versions it
    selects, and a model under a declared rollout has at least two versions servable. Live configs
    alone are INCOMPLETE (the server's config always carries a policy)."""
    mark = check.mark()
    served = served_by_index(index)
    for error in found.errors:
        check.finding(f"{error} (its version policy cannot be read)", severity="warning", rule="config-syntax")
    if not found.sources:
        check.incomplete(f"no model config could be read from {found.where}")
    for source in found.sources:
        model, versions = source.name, served.get(source.name, [])
        check.measure("version_policy", describe_policy(source.config), model=model)
        check.measure("versions served", ", ".join(map(str, versions)) or "none", model=model)
        for message, value in policy_problems(source, versions):
            check.finding(message, model=model, rule="CFG-3", value=value)
        if model in rollouts:
            check.measure("servable versions", len(versions), "versions", model=model, threshold=2, comparison=">=",
                          finding=f"{model}: a {rollouts[model]} rollout is declared but only {len(versions)} "
                                  f"version(s) serve ({versions or 'none'}); old and new must serve side by side")
    for model in sorted(set(rollouts) - {s.name for s in found.sources}):
        check.finding(f"lint.rollout names {model}, which is not among the configs in {found.where}",
                      rule="CFG-3", model=model)
    check.judged_since(mark, "version-policy-served", measured=f"the policies of {len(found.sources)} configs "
                       "against the versions the server serves")
    if check.errors:
        check.recommend("Write version_policy in every config.pbtxt: specific { versions: [old, new] } during a "
                        "canary or blue-green rollout, latest { num_versions: 1 } otherwise.")
    elif not found.from_files:
        check.incomplete("the server's live config always carries a policy, so whether it is written out can only "
                         "be read from the files: pass --triton-model-repository")
