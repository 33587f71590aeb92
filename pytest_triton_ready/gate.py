"""The gate's answer: which checks were in scope, which ran, which were waived, and the exit code.

A release gate may only say READY about a checklist it ran whole. The scope is every check the
run collected (the packaged checklist, or the files given on the command line); a check that was
deselected (`-k`, `-m`), never reached (Ctrl-C, SIGTERM, an unreachable server) or broke is not a
pass. An item is left out on purpose only by a waiver in the YAML file (`gate.waivers`), with a reason,
an owner and an expiry date: a waived check does not run and is listed with its waiver. An
expired waiver excuses nothing: the check runs, and the run cannot be READY until the waiver is
renewed or removed.

Exit codes keep pytest's own meanings (2 interrupted, 3 internal error, 4 usage error, 5 no
tests collected, e.g. when -k selected no check) and give every other verdict its own:

    0 READY   1 NOT READY   6 INCOMPLETE   7 PARTIAL   8 server unreachable
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from pydantic import Field

from .errors import TritonReadyError
from .record.verdict import INCOMPLETE, NOT_READY, PARTIAL, READY
from .yamlschema import Section, setting

EXIT_CODES = {READY: 0, NOT_READY: 1, INCOMPLETE: 6, PARTIAL: 7}
EXIT_INTERRUPTED = 2
EXIT_UNREACHABLE = 8
PYTEST_OWN_CODES = (EXIT_INTERRUPTED, 3, 4, 5)  # interrupted, internal error, usage error, no tests collected

WAIVER_KEYS = ("check", "reason", "owner", "expires")


class WaiverEntry(Section):
    """One waiver: leave a check out of the run on purpose."""

    check: str = Field(min_length=1, description="check id (PERF-3) or check name (test_soak_stability)")
    reason: str = Field(min_length=1, description="why it is left out")
    owner: str = Field(min_length=1, description="who answers for it")
    expires: dt.date = Field(description="after this date (YYYY-MM-DD) the waiver excuses nothing")


class GateSection(Section):
    """`gate:`: what the run's verdict may overlook, on purpose and with an owner."""

    allow_flaky: bool = setting(False, "a check that failed and passed when rerun (--reruns) may count as passed")
    waivers: list[WaiverEntry] = setting(list, "checks left out of the run: check, reason, owner, expires")


class WaiverError(TritonReadyError, ValueError):
    """A waiver that does not say what, why, who and until when."""


@dataclass(frozen=True)
class Waiver:
    """Leave one checklist item out on purpose: by check id (`PERF-4`) or check name."""

    check: str
    reason: str
    owner: str
    expires: dt.date

    def covers(self, check_id: str, name: str) -> bool:
        return self.check in (check_id, name)

    def expired(self, today: dt.date) -> bool:
        return today > self.expires

    def to_dict(self) -> dict[str, str]:
        return {"check": self.check, "reason": self.reason, "owner": self.owner, "expires": self.expires.isoformat()}


def parse_waivers(entries: Iterable[dict[str, Any]] | None, where: str) -> list[Waiver]:
    """Waivers from the YAML `gate.waivers` list; a WaiverError names the entry and what is missing."""
    waivers = []
    for index, entry in enumerate(entries or []):
        label = f"{where}: gate.waivers[{index}]"
        if not isinstance(entry, dict):
            raise WaiverError(f"{label}: expected a mapping with {', '.join(WAIVER_KEYS)}")
        missing = [k for k in WAIVER_KEYS if not str(entry.get(k) or "").strip()]
        if missing:
            raise WaiverError(f"{label}: a waiver needs {', '.join(missing)}")
        expires = entry["expires"]
        if isinstance(expires, str):
            try:
                expires = dt.date.fromisoformat(expires)
            except ValueError:
                raise WaiverError(f"{label}: expires {expires!r} is not a date (YYYY-MM-DD)") from None
        if isinstance(expires, dt.datetime):
            expires = expires.date()
        waivers.append(Waiver(str(entry["check"]), str(entry["reason"]), str(entry["owner"]), expires))
    return waivers


@dataclass(frozen=True)
class ScopeItem:
    """One check of the checklist in scope."""

    nodeid: str
    check_id: str
    name: str

    def to_dict(self) -> dict[str, str]:
        return {"nodeid": self.nodeid, "check_id": self.check_id, "name": self.name}


@dataclass
class Scope:
    """The checklist in scope and what happened to each of its checks."""

    source: str
    items: list[ScopeItem] = field(default_factory=list)
    deselected: set[str] = field(default_factory=set)
    waivers: list[Waiver] = field(default_factory=list)
    today: dt.date = field(default_factory=dt.date.today)

    def waiver_for(self, item: ScopeItem) -> Waiver | None:
        """The waiver that covers `item` (expired or not), if any."""
        return next((w for w in self.waivers if w.covers(item.check_id, item.name)), None)

    def live_waiver(self, item: ScopeItem) -> Waiver | None:
        waiver = self.waiver_for(item)
        return waiver if waiver is not None and not waiver.expired(self.today) else None

    def expired_waivers(self) -> list[Waiver]:
        return [w for w in self.waivers if w.expired(self.today)]

    def unused_waivers(self) -> list[Waiver]:
        """Waivers that match no check in scope: most likely a typo in the check id."""
        return [w for w in self.waivers if not any(w.covers(i.check_id, i.name) for i in self.items)]

    def not_run(self, recorded: set[str]) -> list[ScopeItem]:
        """Checks in scope with no result and no live waiver: what keeps the run PARTIAL."""
        return [i for i in self.items if i.nodeid not in recorded and self.live_waiver(i) is None]

    def to_dict(self, recorded: set[str]) -> dict[str, Any]:
        def why(item: ScopeItem) -> str:
            return "deselected" if item.nodeid in self.deselected else "not reached"

        return {
            "source": self.source,
            "in_scope": len(self.items),
            "ran": sum(i.nodeid in recorded for i in self.items),
            "not_run": [{**i.to_dict(), "why": why(i)} for i in self.not_run(recorded)],
            "waived": [{**i.to_dict(), **self.live_waiver(i).to_dict()}
                       for i in self.items if i.nodeid not in recorded and self.live_waiver(i)],
            "expired_waivers": [w.to_dict() for w in self.expired_waivers()],
            "unused_waivers": [w.to_dict() for w in self.unused_waivers()],
        }


def exit_code(verdict: str, *, pytest_status: int, unreachable: bool = False) -> int:
    """The process exit code for `verdict`; pytest's interrupted, internal, usage and no-tests codes win."""
    if pytest_status in PYTEST_OWN_CODES and not unreachable:
        return pytest_status
    if unreachable:
        return EXIT_UNREACHABLE
    code = EXIT_CODES[verdict]
    if code == 0 and pytest_status == 1:  # an ordinary test beside the checklist failed
        return 1
    return code
