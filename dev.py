#!/usr/bin/env python3
"""Bootstrap for a clone: makes .venv when needed, installs the project into it, then runs.

    python3 dev.py checklist [pytest options]   the checklist against an embedded Triton server
    python3 dev.py test [pytest options]        the project's own test suite (or the test files given),
                                                with one rerun for a failed server test, counted in
                                                the summary (unit tests get none)

Needs only Python >= 3.10 with pip and venv. The install is redone when pyproject.toml changes.
"""

from __future__ import annotations

import os
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = Path(os.environ.get("TRITON_READY_VENV", ROOT / ".venv"))
EXTRAS = "server,gpu,container,test,distributed,kubernetes"
# Load, soak and fault tests measure real traffic on a shared 2-core machine: a failed test marked
# `server` gets one more run (tests/conftest.py), a unit test none; the summary counts the reruns,
# and a unit test that needed one fails the run (a rerun is a defect to fix, not a pass to keep).
SUITE_OPTIONS = ("-p", "no:cacheprovider", "-ra", "--server-reruns=1")


def venv_python() -> Path:
    return VENV / "bin" / "python"


def ensure_environment() -> Path:
    """Create the virtualenv and install the project (editable) unless it is up to date."""
    python = venv_python()
    if not python.exists():
        print(f"dev.py: creating the virtualenv {VENV}", flush=True)
        venv.EnvBuilder(with_pip=True).create(VENV)
    stamp = VENV / ".installed"
    pyproject = ROOT / "pyproject.toml"
    if not stamp.exists() or stamp.stat().st_mtime < pyproject.stat().st_mtime:
        print(f"dev.py: installing pytest-triton-ready[{EXTRAS}] into {VENV}", flush=True)
        subprocess.run([python, "-m", "pip", "install", "-q", "--disable-pip-version-check", "-e", f"{ROOT}[{EXTRAS}]"],
                       check=True)
        stamp.touch()
    return python


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in ("checklist", "test"):
        print(__doc__.strip())
        return 2
    python = ensure_environment()
    command, rest = argv[0], argv[1:]
    if command == "checklist":
        launch = [] if any(a.startswith(("--triton-url", "--triton-launch")) for a in rest) else ["--triton-launch=embedded"]
        args = [str(python), "-m", "pytest_triton_ready.cli", *launch, *rest]
    else:
        paths = [a for a in rest if not a.startswith("-") and Path(a.split("::")[0]).exists()]
        args = [str(python), "-m", "pytest", *SUITE_OPTIONS, *([] if paths else [str(ROOT / "tests")]), *rest]
    return subprocess.run(args, cwd=os.getcwd()).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
