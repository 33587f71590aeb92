"""Collection: the checklist in scope (and the checks a live waiver leaves out), the order checks
run in, phase by phase, and the run plan printed before the first check (`--triton-plan`)."""

from __future__ import annotations

import signal
import threading

import pytest

from ..gate import Scope, ScopeItem
from ..record.model import RUN_ORDER
from ..run import Run
from .state import PLAN_ONLY_KEY, RUN_KEY, check_identity


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Take down the checklist in scope before -k/-m deselect from it, leave out the checks a live
    waiver covers, then run checks phase by phase: monitoring reads the server's live values
    before the performance phase loads it to saturation, and operations and security can use the
    performance phase's measurements (capacity, the hot-reload experiment)."""
    run = config.stash[RUN_KEY]
    scope = Scope(_scope_source(config), waivers=run.waivers)
    for item in items:
        identity = check_identity(item)
        if identity is not None:
            scope.items.append(ScopeItem(item.nodeid, identity[0], getattr(item, "originalname", item.name)))
    run.scope = scope if scope.items else None
    if run.scope is not None:
        by_nodeid = {i.nodeid: i for i in scope.items}
        waived = [item for item in items if item.nodeid in by_nodeid and scope.live_waiver(by_nodeid[item.nodeid])]
        if waived:
            config.hook.pytest_deselected(items=waived)
            items[:] = [item for item in items if item not in waived]
    order = {phase: i for i, phase in enumerate(RUN_ORDER)}

    def rank(item: pytest.Item) -> tuple[int, bool]:
        identity = check_identity(item)
        if identity is None:
            return -1, False
        # run_last=True: after the rest of its phase (PERF-5 compares what PERF-1..4 measured)
        return order.get(identity[1], len(order)), bool(item.get_closest_marker("triton_check").kwargs.get("run_last"))

    items.sort(key=rank)


def pytest_deselected(items: list[pytest.Item]) -> None:
    if not items:
        return
    run = items[0].config.stash.get(RUN_KEY, None)
    if run is not None and run.scope is not None:
        run.scope.deselected.update(item.nodeid for item in items)


def _scope_source(config: pytest.Config) -> str:
    from ..cli import checklist_dir

    packaged = str(checklist_dir())
    args = [str(a) for a in config.args]
    if args and all(a.startswith(packaged) for a in args):
        return "the packaged checklist"
    return "checklist files: " + ", ".join(args or [str(config.rootpath)])


def pytest_collection_finish(session: pytest.Session) -> None:
    """The run plan before the first check (`--triton-plan`: only the plan, then exit 0). SIGTERM
    (what CI sends on cancel) ends the run like Ctrl-C: the report is still written."""
    run = session.config.stash.get(RUN_KEY, None)
    if run is None or run.scope is None:
        return
    _show_plan(session, run)
    if session.config.stash.get(PLAN_ONLY_KEY, False) or threading.current_thread() is not threading.main_thread():
        return
    run.previous_sigterm = signal.signal(signal.SIGTERM, _interrupt_on_sigterm)


def _show_plan(session: pytest.Session, run: Run) -> None:
    """Print what is under test, who owns it and what the checks about to run will do to it."""
    from ..estimates import estimate_block
    from ..policy import plan_block

    running = {identity[0] for identity in map(check_identity, session.items) if identity is not None}
    waived = sorted({i.check_id for i in run.scope.items if run.scope.live_waiver(i)})
    text = plan_block(run.settings, running, estimate_lines=estimate_block(run.settings, running),
                      deployment=run.deployment)
    if waived:
        text += "\n  waived (gate.waivers), not run: " + ", ".join(waived)
    run.plan = text.splitlines()
    if session.config.getoption("triton_plan", False):
        session.config.stash[PLAN_ONLY_KEY] = True
        text += "\n  --triton-plan: nothing was sent to the server"
    writer = session.config.pluginmanager.get_plugin("terminalreporter")
    if writer is not None:
        writer.write_line("")
        for line in text.splitlines():
            writer.write_line(line)
    else:
        print(text, flush=True)


@pytest.hookimpl(tryfirst=True)
def pytest_runtestloop(session: pytest.Session) -> bool | None:
    """`--triton-plan`: the plan was printed; run no check."""
    return True if session.config.stash.get(PLAN_ONLY_KEY, False) else None


def _interrupt_on_sigterm(signum, frame) -> None:
    raise KeyboardInterrupt("SIGTERM")
