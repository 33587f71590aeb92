"""Reruns for server tests only, counted in the summary (hooks that tests/conftest.py takes in).

`--server-reruns=N` (dev.py test gives 1) reruns a failed test marked `server`: real traffic on a
shared machine. A unit test gets none. The summary counts the reruns, server and unit tests apart,
with the end of each first attempt's failure message, and a unit test that passed only on a rerun
(`--reruns` given by hand) fails the session."""

from __future__ import annotations

import pytest

SERVER_NODEIDS_KEY = pytest.StashKey[set]()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--server-reruns", type=int, default=0, metavar="N",
                     help="reruns for a failed test marked `server`; a unit test gets none, and a unit test "
                          "rerun by other means fails the session")


def give_server_tests_reruns(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Call after the `server` marks are given: those items get the reruns, and are remembered."""
    reruns = config.getoption("--server-reruns")
    server_tests = config.stash.setdefault(SERVER_NODEIDS_KEY, set())
    for item in items:
        if item.get_closest_marker("server") is not None:
            server_tests.add(item.nodeid)
            if reruns:
                item.add_marker(pytest.mark.flaky(reruns=reruns, reruns_delay=2))


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """For a run that loads this module as a plugin (-p reruns) rather than through the conftest."""
    if SERVER_NODEIDS_KEY not in config.stash:
        give_server_tests_reruns(config, items)


_SESSION_RERUNS: list[str] = []  # node ids of this session's reruns, one entry per rerun
_FIRST_FAILURES: dict[str, str] = {}  # node id: why its first attempt failed (the end of the message)
FAILURE_TAIL_CHARS = 2000


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.outcome == "rerun":
        _SESSION_RERUNS.append(report.nodeid)
        crash = getattr(report.longrepr, "reprcrash", None)
        message = crash.message if crash is not None else str(report.longrepr or "")
        _FIRST_FAILURES.setdefault(report.nodeid, f"{report.when}: {message[-FAILURE_TAIL_CHARS:]}")


def split_reruns(config: pytest.Config) -> tuple[list[str], list[str]]:
    """(server tests, unit tests) that needed a rerun, one entry per rerun."""
    server_tests = config.stash.get(SERVER_NODEIDS_KEY, set())
    return [n for n in _SESSION_RERUNS if n in server_tests], [n for n in _SESSION_RERUNS if n not in server_tests]


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """A unit test that passed only on a rerun is a failure: it has no real traffic to blame."""
    if split_reruns(session.config)[1] and exitstatus == 0:
        session.exitstatus = 1


def pytest_terminal_summary(terminalreporter) -> None:
    server, unit = split_reruns(terminalreporter.config)
    if not (server or unit):
        return
    terminalreporter.section("reruns")
    terminalreporter.line(f"{len(server) + len(unit)} reruns: {len(server)} of server tests, {len(unit)} of unit tests"
                          + (" (a unit test that needed a rerun fails the session)" if unit else ""))
    for nodeid in sorted(set(server + unit)):
        terminalreporter.line(f"  rerun {_SESSION_RERUNS.count(nodeid)}x: {nodeid}" + ("" if nodeid in server else " [unit]"))
        if nodeid in _FIRST_FAILURES:  # a rerun is a defect to fix: say what the first attempt saw
            for line in _FIRST_FAILURES[nodeid].splitlines():
                terminalreporter.line(f"      {line}")
