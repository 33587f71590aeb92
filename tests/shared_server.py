"""The test session's shared demo server, watched: alive before each test that uses it, unchanged
after it, restarted with the reason when it died.

A dead shared server used to fail every later test with "connection refused" and take its log
with it. Now every server the session starts keeps its log under the session's directory, a death
is named (the test during which it happened, the exit status, the log's last warning and error
lines) in the output and in `deaths.log`, and the next test gets a fresh server.
"""

from __future__ import annotations

import shutil
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from pytest_triton_ready.launchers.embedded import DEMO_REPOSITORY, EmbeddedLauncher
from pytest_triton_ready.launchers.settle import repository_index
from pytest_triton_ready.server.client import http_status


def _config_text(http_url: str, model: str) -> str:
    try:
        with urllib.request.urlopen(f"{http_url}/v2/models/{model}/config", timeout=5) as response:
            return response.read().decode()
    except urllib.error.HTTPError as exc:
        return f"config answered {exc.code}"
    except (urllib.error.URLError, OSError) as exc:
        return f"config not read: {exc}"


def server_state(http_url: str) -> dict[str, str]:
    """What a test may not leave changed: each model's state and its effective config."""
    index = repository_index(http_url, timeout_s=5)
    if index is None:
        return {"": "repository index did not answer with JSON"}
    return {entry["name"]: f"{entry.get('state')} {_config_text(http_url, entry['name'])}" for entry in index}


def warning_lines(log: str, most: int = 15) -> list[str]:
    """The log's warning and error lines (Triton's W/E prefixes, `error:` lines), newest last."""
    picked = [line for line in log.splitlines() if line.startswith(("E", "W", "error")) or "error:" in line]
    return picked[-most:]


@dataclass
class SharedDemoServer:
    """Owns the current shared server and every one it replaced."""

    log_dir: Path
    launcher: EmbeddedLauncher | None = None
    generation: int = 0
    deaths: list[str] = field(default_factory=list)
    baseline: dict[str, str] = field(default_factory=dict)

    def current(self) -> EmbeddedLauncher:
        if self.launcher is None:
            self._start()
        return self.launcher

    def _start(self) -> None:
        self.generation += 1
        self.launcher = EmbeddedLauncher(DEMO_REPOSITORY)
        self.launcher.start()
        self.baseline = server_state(self.launcher.endpoints.http_url)

    def dead_because(self) -> str | None:
        """Why the current server is not serving, or None when it answers live."""
        launcher = self.launcher
        if launcher is None:
            return None
        code = launcher.process.poll() if launcher.process else None
        if code is not None:
            return f"tritonserver exited with status {code}"
        status = http_status(f"{launcher.endpoints.http_url}/v2/health/live", timeout_s=5)
        if status != 200:
            return f"tritonserver (pid {launcher.pid}) no longer answers /v2/health/live ({status})"
        return None

    def changes(self) -> list[str]:
        """Models whose state or effective config differs from when this server started."""
        now = server_state(self.launcher.endpoints.http_url)
        return sorted(f"{name}: {self.baseline.get(name, 'absent')[:120]} -> {now.get(name, 'absent')[:120]}"
                      for name in set(now) | set(self.baseline) if now.get(name) != self.baseline.get(name))

    def replace(self, cause: str, during: str) -> str:
        """Keep the dead server's log, write down the death, start a new server; the one-line story."""
        launcher = self.launcher
        kept = self.log_dir / f"tritonserver-{self.generation}.log"
        if launcher.log_path.exists():
            shutil.copy2(launcher.log_path, kept)
        else:
            kept.write_text("")
        tail = warning_lines(kept.read_text(errors="replace"))
        story = (f"shared demo server #{self.generation} died during {during}: {cause}; log kept at {kept}; "
                 f"last warnings/errors:\n  " + "\n  ".join(tail or ["(none)"]))
        self.deaths.append(story)
        with open(self.log_dir / "deaths.log", "a") as deaths:
            deaths.write(story + "\n\n")
        launcher.cleanup()
        self.launcher = None
        self._start()
        return story

    def close(self) -> None:
        if self.launcher is not None:
            shutil.copy2(self.launcher.log_path, self.log_dir / f"tritonserver-{self.generation}.log")
            self.launcher.cleanup()
