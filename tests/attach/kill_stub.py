"""Kill one model instance of the supervised server: SIGKILL to the first python backend stub of
MODEL among the descendants of the server whose pid is in PID_FILE; prints the instance's name.

    python kill_stub.py PID_FILE MODEL
"""

import os
import signal
import sys
from pathlib import Path

from pytest_triton_ready.launchers.process import local_stubs

pid = int(Path(sys.argv[1]).read_text())
stubs = local_stubs(pid, sys.argv[2])
if not stubs:
    sys.exit(f"no python backend stub of {sys.argv[2]} under pid {pid}")
os.kill(stubs[0].pid, signal.SIGKILL)
print(stubs[0].instance)
