#!/usr/bin/env bash
# Build a tritonserver container image without any image registry: a Debian bookworm root
# filesystem (debootstrap) with Python 3.11 and the tritonserver 2.51.0 that the nvidia-pytriton
# 0.7.0 wheel carries, imported into a container engine (podman or docker).
#
#   scripts/build-triton-image.sh [IMAGE]
#
# IMAGE defaults to $TRITON_READY_BUILD_IMAGE or localhost/triton-ready/tritonserver:2.51.0-pytriton0.7.0.
# Environment:
#   ENGINE                 podman (default) or docker: the command that imports the image
#   TRITON_READY_CACHE     where the finished root filesystem, Debian packages and wheels are kept
#                          (default /var/cache/triton-ready as root, else ~/.cache/triton-ready)
#   DEBIAN_MIRROR          default http://deb.debian.org/debian
#   EXTRA_WHEELS           more pip requirements for the models' python environment (pinned, e.g.
#                          "pillow==10.4.0"); they change the recipe hash
#   FORCE=1                rebuild even when the image or the cached root filesystem is current
#
# Reproducible where it can be: the suite, the Debian packages, the wheels and their versions are
# pinned here; the recipe's hash (this file's text and EXTRA_WHEELS) is the image's label
# `triton-ready.recipe`, so an image built from the same recipe is reused as it is, and a cached
# root filesystem of the same recipe is imported again without rebuilding. Debian's point releases
# still move package versions within bookworm; the image records what it got in
# /opt/triton-ready-image/packages.txt and wheels.txt.
#
# Exit code 0 with the image name on the last line of stdout; 1 with one line on stderr otherwise.
set -euo pipefail

SUITE=bookworm
PYTHON_VERSION=3.11
PYTRITON_VERSION=0.7.0          # carries tritonserver 2.51.0 (the 24.10 release)
NUMPY_VERSION=1.26.4            # the wheel's python backend stub is built for numpy 1
DEBIAN_PACKAGES=python3,python3-venv,libpython3.11,procps
IMAGE=${1:-${TRITON_READY_BUILD_IMAGE:-localhost/triton-ready/tritonserver:2.51.0-pytriton${PYTRITON_VERSION}}}
ENGINE=${ENGINE:-podman}
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
EXTRA_WHEELS=${EXTRA_WHEELS:-}
if [ "$(id -u)" = 0 ]; then default_cache=/var/cache/triton-ready; else default_cache=$HOME/.cache/triton-ready; fi
CACHE=${TRITON_READY_CACHE:-$default_cache}

fail() { echo "build-triton-image: $*" >&2; exit 1; }
say() { echo "build-triton-image: $*" >&2; }

command -v "$ENGINE" >/dev/null || fail "$ENGINE is not installed (ENGINE=podman or docker)"
RECIPE=$( { cat "$0"; echo "$EXTRA_WHEELS"; } | sha256sum | cut -c1-16)

current=$("$ENGINE" image inspect --format '{{ index .Config.Labels "triton-ready.recipe" }}' "$IMAGE" 2>/dev/null || true)
if [ "${FORCE:-0}" != 1 ] && [ "$current" = "$RECIPE" ]; then
  say "$IMAGE is current (recipe $RECIPE)"
  echo "$IMAGE"
  exit 0
fi

mkdir -p "$CACHE/debs" "$CACHE/wheels"
ROOTFS=$CACHE/rootfs-$RECIPE
if [ "${FORCE:-0}" = 1 ] || [ ! -e "$ROOTFS/.complete" ]; then
  [ "$(id -u)" = 0 ] || fail "building the root filesystem needs root (debootstrap and chroot)"
  command -v debootstrap >/dev/null || fail "debootstrap is not installed (apt-get install debootstrap)"
  partial=$ROOTFS.partial
  rm -rf "$partial"
  started=$(date +%s)
  say "debootstrap --variant=minbase $SUITE (+ $DEBIAN_PACKAGES) into $partial"
  debootstrap --variant=minbase --include="$DEBIAN_PACKAGES" --cache-dir="$CACHE/debs" \
    "$SUITE" "$partial" "$MIRROR" >"$CACHE/debootstrap.log" 2>&1 \
    || fail "debootstrap failed; see $CACHE/debootstrap.log: $(tail -n 1 "$CACHE/debootstrap.log")"

  say "wheels: nvidia-pytriton==$PYTRITON_VERSION numpy==$NUMPY_VERSION $EXTRA_WHEELS"
  # shellcheck disable=SC2086
  python3 -m pip download -q --disable-pip-version-check --no-deps --only-binary=:all: \
    --python-version "$PYTHON_VERSION" --implementation cp --abi "cp${PYTHON_VERSION/./}" --abi abi3 --abi none \
    --platform manylinux_2_35_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    --platform any -d "$CACHE/wheels" \
    "nvidia-pytriton==$PYTRITON_VERSION" "numpy==$NUMPY_VERSION" $EXTRA_WHEELS \
    || fail "pip download of the wheels failed"
  mkdir -p "$partial/tmp/wheels"
  (
    cd "$CACHE/wheels"
    shopt -s nullglob
    wheels=(nvidia_pytriton-"$PYTRITON_VERSION"-*.whl numpy-"$NUMPY_VERSION"-*.whl)
    for extra in $EXTRA_WHEELS; do
      name=${extra%%[=<>!~]*}; version=${extra##*=}
      wheels+=("${name//-/_}-$version-"*.whl "$name-$version-"*.whl)
    done
    cp "${wheels[@]}" "$partial/tmp/wheels/"
  )

  venv=/opt/tritonserver/venv
  site=$venv/lib/python$PYTHON_VERSION/site-packages
  in_root() { chroot "$partial" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 "$@"; }
  in_root python3 -m venv "$venv" || fail "python3 -m venv failed in the root filesystem"
  in_root sh -c "$venv/bin/pip install -q --disable-pip-version-check --no-index --no-deps /tmp/wheels/*.whl" \
    || fail "pip install of the wheels failed in the root filesystem"
  server=$site/pytriton/tritonserver
  [ -x "$partial$server/bin/tritonserver" ] || fail "the wheel has no tritonserver at $server/bin"
  # The python backend's stub for this Python; the other versions' stubs are dropped.
  cp "$partial$server/python_backend_stubs/$PYTHON_VERSION/triton_python_backend_stub" "$partial$server/backends/python/"
  rm -rf "$partial$server/python_backend_stubs"
  # The official image's layout: /opt/tritonserver/{bin,backends,caches}.
  mkdir -p "$partial/opt/tritonserver/bin" "$partial/opt/triton-ready-image"
  ln -s "$server/backends" "$partial/opt/tritonserver/backends"
  ln -s "$server/caches" "$partial/opt/tritonserver/caches"
  cat >"$partial/opt/tritonserver/bin/tritonserver" <<EOF
#!/bin/sh
# tritonserver of nvidia-pytriton $PYTRITON_VERSION: its libraries, and the venv's python3 first on
# PATH (the python backend stub finds its interpreter, numpy and site-packages through it).
export LD_LIBRARY_PATH=$site/nvidia_pytriton.libs\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}
export PATH=$venv/bin:\$PATH
exec $server/bin/tritonserver --backend-directory=/opt/tritonserver/backends \\
    --cache-directory=/opt/tritonserver/caches "\$@"
EOF
  chmod 755 "$partial/opt/tritonserver/bin/tritonserver"
  in_root dpkg-query -W >"$partial/opt/triton-ready-image/packages.txt"
  in_root "$venv/bin/pip" list --format=freeze --disable-pip-version-check \
    >"$partial/opt/triton-ready-image/wheels.txt" 2>/dev/null
  echo "$RECIPE" >"$partial/opt/triton-ready-image/recipe"
  # What a server image does not need.
  rm -rf "$partial/tmp/wheels" "$partial/var/cache/apt/archives/"*.deb "$partial/var/lib/apt/lists/"* \
    "$partial/usr/share/doc" "$partial/usr/share/man" "$partial/usr/share/locale"
  find "$partial$venv" -name __pycache__ -prune -exec rm -rf {} +
  touch "$partial/.complete"
  rm -rf "$ROOTFS"
  mv "$partial" "$ROOTFS"
  say "root filesystem built in $(( $(date +%s) - started )) s"
  # Root filesystems of older recipes.
  for old in "$CACHE"/rootfs-*; do
    [ "$old" = "$ROOTFS" ] || rm -rf "$old"
  done
fi

started=$(date +%s)
say "importing $ROOTFS as $IMAGE ($ENGINE)"
tar -C "$ROOTFS" --exclude=./.complete -c . | "$ENGINE" import \
  --change "ENV PATH=/opt/tritonserver/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
  --change "LABEL triton-ready.recipe=$RECIPE" \
  --change "LABEL org.opencontainers.image.description=tritonserver 2.51.0 of nvidia-pytriton $PYTRITON_VERSION on Debian $SUITE" \
  --change "WORKDIR /opt/tritonserver" \
  --change "CMD [\"tritonserver\", \"--help\"]" \
  - "$IMAGE" >/dev/null || fail "$ENGINE import failed"
say "imported in $(( $(date +%s) - started )) s"
echo "$IMAGE"
