"""The one command runner (pytest_triton_ready.commands) and the fleet's replica death through the
fault skeleton with real commands (no server): a kill that did not take is INCOMPLETE, a failed
kill is INCOMPLETE naming the command, the restore runs in a `finally`."""

from __future__ import annotations

import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import SimpleNamespace

import pytest

from pytest_triton_ready.commands import run_command
from pytest_triton_ready.faults.experiment import run_experiment
from pytest_triton_ready.fleet.death import ReplicaDeath
from pytest_triton_ready.load.timeline import Bin, Event


def test_an_argv_command_runs_without_a_shell_and_its_environment_is_added():
    done = run_command([sys.executable, "-c", "import os; print(os.environ['WHO'])"], "fleet.replicas_command",
                       env={"WHO": "replica-1"})
    assert done.ok and done.last_line() == "replica-1" and done.command.startswith(sys.executable)


def test_a_command_that_cannot_start_is_one_line_naming_where_it_was_declared():
    done = run_command(["/nonexistent/kubectl", "get", "pods"], "fleet.replicas_command")
    assert not done.ok and done.start_error
    assert done.problem().startswith("fleet.replicas_command (`/nonexistent/kubectl get pods`) could not be started: ")


class _Live(BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 - the http.server hook
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture
def live_replica():
    """A replica whose /v2/health/live answers 200 throughout: a kill that does not take."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Live)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


class _Traffic:
    def __init__(self):
        self.events = []
        self.bins = [Bin(round(i * 0.1, 1), 6, 0, 0, 1.0, 2.0) for i in range(10)]
        self.result = SimpleNamespace(timeline=SimpleNamespace(bins=self.bins, events=self.events),
                                      stats=SimpleNamespace(errors={}))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        pass

    def timeline_so_far(self):
        return self.bins[:5], list(self.events)

    def elapsed_s(self):
        return 0.5

    def event(self, name):
        self.events.append(Event(0.5, name))


SECTION = SimpleNamespace(death_rate_per_s=60.0, death_steady_s=0.01, death_observe_s=0.3)


def _death(http_url, kill, restore=None):
    replica = SimpleNamespace(name="replica-1", http_url=http_url, kill=kill, restore=restore)
    load = SimpleNamespace(open_loop=lambda model, rate, protocol, late_drop_s: _Traffic())
    return ReplicaDeath(load, replica, "identity", SECTION)


def test_a_replica_kill_that_did_not_take_is_incomplete_never_a_pass(live_replica):
    outcome = run_experiment(_death(live_replica, "true", restore="echo back"))
    assert outcome.incomplete.startswith("no death was observed: replica replica-1 kept answering ")
    assert "the kill did not take" in outcome.incomplete
    assert [c.what for c in outcome.commands] == ["replica replica-1 kill action", "replica replica-1 restore action"]
    assert outcome.restored is True


def test_a_replica_that_stops_answering_is_judged():
    outcome = run_experiment(_death("http://127.0.0.1:9", "true"))  # nothing listens: the replica is gone
    assert outcome.incomplete is None and outcome.stopped_answering_s is not None
    assert outcome.kill_at_s == 0.5 and outcome.lost_after == 0 and outcome.reroute_s == 0.0


def test_a_failed_kill_action_is_incomplete_naming_it_and_the_restore_still_runs(live_replica):
    outcome = run_experiment(_death(live_replica, "echo no such pod >&2; exit 4", restore="echo back"))
    assert outcome.incomplete.startswith("the kill action for replica replica-1 failed: replica replica-1 kill action "
                                         "(`echo no such pod >&2; exit 4`) exited with code 4")
    assert outcome.restored is True


def test_a_replica_without_a_kill_action_is_not_touched():
    outcome = run_experiment(_death("http://127.0.0.1:9", None))
    assert outcome.incomplete.startswith("no kill action declared for replica replica-1") and not outcome.commands
