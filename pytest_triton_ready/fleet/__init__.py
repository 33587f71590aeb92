"""A fleet: replicas behind a load balancer. Targets and discovery (`targets`, `discovery`),
consistency across replicas (`consistency`, CFG-5), traffic spread and fleet capacity (`spread`,
PERF-6), and the replica-death experiment (`death`, PERF-4). See docs/fleet.md."""

from .discovery import resolve_fleet
from .targets import DiscoveryError, Fleet, FleetSection, Replica

__all__ = ["DiscoveryError", "Fleet", "FleetSection", "Replica", "resolve_fleet"]
