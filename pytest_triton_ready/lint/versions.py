"""CFG-3: what a model's version_policy says it serves, and how that compares with the server."""

from __future__ import annotations


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
