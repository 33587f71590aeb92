#!/usr/bin/env bash
# Gathers, on a machine with a package registry, the wheels the GPU machine lacks, for CPython 3.12
# manylinux x86_64, small enough to travel with a run (64 MiB with the working tree):
#   - the project itself (pip wheel --no-deps);
#   - nvidia-pytriton 0.7.0 (the tritonserver), slimmed to the 3.12 stub: 39.5 MB instead of 55.4;
#   - the project's dependencies (read from pyproject.toml) with theirs, minus what the GPU machine
#     already has (see ../shared/notes/gpu-machine.md; GPU_MACHINE_HAS overrides the list).
#
#   scripts/gpu-wheels.sh [DIR]        (default: build/gpu-wheels, ignored by git, so `carry`-able)
#
# Then on the GPU machine: scripts/gpu-check.sh OUT_DIR build/gpu-wheels
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
DIR=${1:-$ROOT/build/gpu-wheels}
PYTHON=${PYTHON:-python3}
TARGET_PYTHON=${TARGET_PYTHON:-3.12}
ABI="cp${TARGET_PYTHON/./}"
# What the GPU machine's python has, and nothing depends on a newer version of: not carried.
HAS=${GPU_MACHINE_HAS:-"numpy torch nvidia-ml-py pytest pluggy iniconfig packaging requests urllib3 certifi idna charset-normalizer pyyaml jinja2 markupsafe psutil rich pygments markdown-it-py mdurl matplotlib uvloop typing-extensions setuptools pbr wheel"}
PLATFORMS=(--platform manylinux_2_35_x86_64 --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64
           --platform manylinux2014_x86_64 --platform manylinux1_x86_64)
FOR_TARGET=(--only-binary=:all: --python-version "$TARGET_PYTHON" --implementation cp --abi "$ABI" "${PLATFORMS[@]}")

WORK=$(mktemp -d "${TMPDIR:-/tmp}/gpu-wheels.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
rm -rf "$DIR"
mkdir -p "$DIR"

echo "gpu-wheels: the project"
ISOLATION=()
"$PYTHON" -c 'import setuptools' 2> /dev/null && ISOLATION=(--no-build-isolation)
"$PYTHON" -m pip wheel --quiet --no-deps "${ISOLATION[@]}" -w "$DIR" "$ROOT"

echo "gpu-wheels: nvidia-pytriton, slimmed to the $TARGET_PYTHON stub"
"$PYTHON" -m pip download --quiet --no-deps "${FOR_TARGET[@]}" -d "$WORK/pytriton" "nvidia-pytriton==0.7.0"
"$PYTHON" "$ROOT/scripts/slim-pytriton-wheel.py" "$WORK"/pytriton/nvidia_pytriton-*.whl "$DIR" --python "$TARGET_PYTHON"

echo "gpu-wheels: dependencies"
mapfile -t REQUIREMENTS < <("$PYTHON" - "$ROOT/pyproject.toml" << 'EOF'
import sys, tomllib
for requirement in tomllib.load(open(sys.argv[1], "rb"))["project"]["dependencies"]:
    print(requirement)
EOF
)
"$PYTHON" -m pip download --quiet "${FOR_TARGET[@]}" -d "$WORK/deps" "${REQUIREMENTS[@]}"
for wheel in "$WORK"/deps/*.whl; do
    name=$(basename "$wheel" | cut -d- -f1 | tr '[:upper:]_.' '[:lower:]--')
    if [[ " $HAS " == *" $name "* ]]; then
        echo "  not carried (on the GPU machine): $(basename "$wheel")"
    else
        cp "$wheel" "$DIR/"
    fi
done

total=$(du -cb "$DIR"/*.whl | tail -1 | cut -f1)
ls -l "$DIR"
echo "gpu-wheels: $(ls "$DIR"/*.whl | wc -l) wheels, $((total / 1048576)) MiB in $DIR"
if (( total > 60 * 1048576 )); then
    echo "gpu-wheels: warning: more than 60 MiB; with the working tree a run carries at most 64 MiB" >&2
fi
