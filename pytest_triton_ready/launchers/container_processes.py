"""The processes inside a container, read from /proc through `docker exec` (no `ps` needed in the
image): the listing script, its parser, and which of the processes are python backend stubs."""

from __future__ import annotations

import re

STUB_NAME = "triton_python_backend_stub"


def parse_process_list(text: str) -> list[tuple[int, str]]:
    """`LIST_PROCESSES_SCRIPT`'s output (`/proc/PID/cmdline:ARGS`) -> [(pid, command line)]."""
    processes = []
    for line in text.splitlines():
        match = _PROC_LINE.match(line.strip())
        if match and match.group("cmdline").strip():
            processes.append((int(match.group("pid")), match.group("cmdline").strip()))
    return processes


def select_stubs(processes: list[tuple[int, str]], repository: str, model: str | None = None) -> list[int]:
    """Pids of python backend stubs among `processes`; with `model`, only that model's. A stub's
    first argument is its model file, `<repository>/<model>/<version>/model.py`."""
    pids = []
    for pid, cmdline in processes:
        argv = cmdline.split()
        if not argv or not argv[0].endswith(STUB_NAME):
            continue
        if model is None or (len(argv) > 1 and argv[1].startswith(f"{repository.rstrip('/')}/{model}/")):
            pids.append(pid)
    return pids


# Every process's command line in two processes (grep and tr), from /proc: no `ps` needed in the
# image. Kernel threads and zombies have an empty cmdline and print nothing.
LIST_PROCESSES_SCRIPT = "grep -a -H '' /proc/[0-9]*/cmdline 2>/dev/null | tr '\\000' ' '; true"
_PROC_LINE = re.compile(r"^/proc/(?P<pid>[0-9]+)/cmdline:(?P<cmdline>.*)$")
