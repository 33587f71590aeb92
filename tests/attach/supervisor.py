"""A deployment this test suite does not run through the plugin: a small supervisor, like
systemd's Restart=always or a container's restart policy, that runs tritonserver through
`pytest_triton_ready.launchers.embedded` and starts it again on the same ports whenever it dies.

    python supervisor.py REPOSITORY STATE_DIR

STATE_DIR gets `endpoints.json` once the server first answers, `pid` (the tritonserver process,
rewritten at every start), `last_exit` (the exit code of the last run that ended) and `starts`
(one line per start). SIGTERM or SIGINT to the supervisor stops the server and ends it.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path

from pytest_triton_ready.launchers.embedded import EmbeddedLauncher


def write(path: Path, text: str) -> None:
    partial = path.with_suffix(".partial")
    partial.write_text(text)
    os.replace(partial, path)


def main() -> int:
    repository, state = Path(sys.argv[1]), Path(sys.argv[2])
    state.mkdir(parents=True, exist_ok=True)
    launcher = EmbeddedLauncher(repository, startup_timeout_s=180)
    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    signal.signal(signal.SIGINT, lambda *_: stopping.append(True))
    try:
        while not stopping:
            launcher.start()
            write(state / "pid", str(launcher.pid))
            with open(state / "starts", "a") as starts:
                starts.write(f"{time.time():.3f} pid {launcher.pid}\n")
            if not (state / "endpoints.json").exists():
                write(state / "endpoints.json", json.dumps(vars(launcher.endpoints)))
            while not stopping and launcher.exit_code() is None:
                time.sleep(0.05)
            if stopping:
                break
            write(state / "last_exit", str(launcher.exit_code()))
            launcher.kill()  # what is left of the dead server's process group (stubs), as systemd does
    finally:
        launcher.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
