#!/usr/bin/env bash
# The GPU evidence run: the whole packaged checklist against the embedded tritonserver serving the
# demo models on KIND_GPU instances (KIND_CPU where no GPU can run them, so GPU checks say not
# applicable), with the readiness report, JUnit XML and the server's whole log in one directory.
#
#   scripts/gpu-check.sh OUT_DIR [WHEEL_DIR] [-- TRITON-READY ARGS...]
#
#   OUT_DIR     created if missing; gets report/ (readiness.json ...), junit.xml, tritonserver.log,
#               triton-ready.out, environment.txt, instance-kind.txt, model-repository/, exit-code
#   WHEEL_DIR   optional: wheels to install first (pip --no-index --no-deps --target), for a
#               machine without a package registry; see docs/container-and-gpu.md
#   after --    extra triton-ready (pytest) arguments, e.g. -- -k 'not PERF'
#
# Environment: PYTHON (default python3), TRITON_READY_ARGS (extra arguments, split on spaces;
# the same role as the trailing ones), GPU_CHECK_KIND (auto|gpu|cpu, default auto),
# GPU_CHECK_SITE (where the wheels go; default a temporary directory, removed at the end),
# GPU_CHECK_SOAK (the short soak, default 60s, passed as --triton-soak; empty for none).
# Exit code: triton-ready's (0 READY, 1 a check failed or could not run, >1 usage or internal
# error); 3 when the setup before the checklist failed.
set -euo pipefail

usage() { sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit "${1:-3}"; }
[[ $# -ge 1 && $1 != "-h" && $1 != "--help" ]] || usage 0

OUT=$1; shift
WHEELS=""
if [[ $# -gt 0 && $1 != "--" ]]; then WHEELS=$1; shift; fi
if [[ $# -gt 0 && $1 == "--" ]]; then shift; fi
EXTRA=("$@")
read -r -a FROM_ENV <<< "${TRITON_READY_ARGS:-}"
PYTHON=${PYTHON:-python3}
KIND=${GPU_CHECK_KIND:-auto}
SOAK=${GPU_CHECK_SOAK-60s}

fail() { echo "gpu-check: $*" >&2; echo 3 > "$OUT/exit-code"; exit 3; }

mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
rm -f "$OUT/exit-code"

command -v "$PYTHON" > /dev/null || fail "no $PYTHON on PATH (set PYTHON=/path/to/python3)"
PYTHON=$("$PYTHON" -c 'import sys; print(sys.executable)')
# The python backend stub finds its interpreter (and torch, numpy) as `python3` on PATH.
export PATH="$(dirname "$PYTHON"):$PATH"
if [[ -n $WHEELS ]]; then
    [[ -d $WHEELS ]] || fail "wheel directory $WHEELS does not exist"
    WHEELS=$(cd "$WHEELS" && pwd)
fi
if [[ -n ${GPU_CHECK_SITE:-} ]]; then
    mkdir -p "$GPU_CHECK_SITE"
    GPU_CHECK_SITE=$(cd "$GPU_CHECK_SITE" && pwd)
fi
# Run from the output directory: `python -m` puts the working directory first on sys.path, and a
# source checkout there would shadow the installed package (whose checklist is a subpackage).
cd "$OUT"

if [[ -n $WHEELS ]]; then
    shopt -s nullglob
    wheels=("$WHEELS"/*.whl)
    shopt -u nullglob
    [[ ${#wheels[@]} -gt 0 ]] || fail "no .whl file in $WHEELS"
    if [[ -n ${GPU_CHECK_SITE:-} ]]; then
        SITE=$GPU_CHECK_SITE
    else
        SITE=$(mktemp -d "${TMPDIR:-/tmp}/gpu-check-site.XXXXXX")
        trap 'rm -rf "$SITE"' EXIT
    fi
    echo "gpu-check: installing ${#wheels[@]} wheels into $SITE"
    "$PYTHON" -m pip install --quiet --no-index --no-deps --disable-pip-version-check --target "$SITE" "${wheels[@]}" \
        || fail "pip could not install the wheels of $WHEELS"
    export PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}"
fi

"$PYTHON" -c 'import importlib.util as u, pytest_triton_ready.checks; assert u.find_spec("pytriton")' 2> /dev/null \
    || fail "pytest-triton-ready and nvidia-pytriton must be importable by $PYTHON: install them, or carry their wheels in WHEEL_DIR (pip wheel --no-deps -w WHEEL_DIR .)"

{
    echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "host: $(hostname)"
    "$PYTHON" - << 'EOF'
import importlib, platform
from pathlib import Path
print(f"python: {platform.python_version()} ({platform.machine()})")
for name in ("pytest_triton_ready", "pytriton", "tritonclient", "numpy", "torch", "pynvml"):
    try:
        module = importlib.import_module(name)
        version = getattr(module, "__version__", "")
        if name == "pytriton":
            from importlib.metadata import version as dist_version
            version = dist_version("nvidia-pytriton")
        if name == "torch":
            version += f" cuda={module.version.cuda} cuda_available={module.cuda.is_available()}"
        print(f"{name}: {version or 'installed'} at {Path(module.__file__).parent}")
    except Exception as exc:
        print(f"{name}: not available ({type(exc).__name__}: {exc})")
EOF
    if command -v nvidia-smi > /dev/null; then
        nvidia-smi --query-gpu=index,name,uuid,driver_version,memory.total,power.limit --format=csv 2>&1 || true
    else
        echo "nvidia-smi: not on PATH"
    fi
} > "$OUT/environment.txt" 2>&1

REPO="$OUT/model-repository"
"$PYTHON" -m pytest_triton_ready.demo_repository --kind="$KIND" "$REPO" > "$OUT/instance-kind.txt" \
    || fail "could not write the demo repository: $(cat "$OUT/instance-kind.txt")"
echo "gpu-check: $(cat "$OUT/instance-kind.txt")"

# The short soak (PERF-3); GPU_CHECK_SOAK=0 turns it off.
SOAK_ARGS=()
if [[ -n $SOAK ]]; then
    SOAK_ARGS=("--triton-soak=$SOAK")
    echo "gpu-check: short soak of $SOAK"
fi

ARGS=(
    --triton-launch=embedded
    "--triton-model-repository=$REPO"
    "--readiness-report=$OUT/report"
    "--triton-server-log=$OUT/tritonserver.log"
    "--junitxml=$OUT/junit.xml"
    -o junit_family=xunit2
    -rA
)
set +e
"$PYTHON" -m pytest_triton_ready.cli "${ARGS[@]}" "${SOAK_ARGS[@]}" "${FROM_ENV[@]}" "${EXTRA[@]}" 2>&1 | tee "$OUT/triton-ready.out"
code=${PIPESTATUS[0]}
set -e
echo "$code" > "$OUT/exit-code"
echo "gpu-check: triton-ready exited with $code; evidence in $OUT"
exit "$code"
