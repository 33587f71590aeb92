#!/usr/bin/env python3
"""Write a slimmer nvidia-pytriton wheel for one Python version: the python backend stubs of the
other versions go, and so do the bundled libraries only those stubs load (the 3.13 stub brings its
own libpython, 13.6 MB compressed). The server, backends, caches and every library tritonserver
itself links stay, and RECORD is rewritten to match, so `pip install` takes it like the original.

    scripts/slim-pytriton-wheel.py WHEEL OUT_DIR [--python 3.12]

Prints the new wheel's path and both sizes.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import re
import sys
import zipfile
from pathlib import Path

STUBS = re.compile(r"^pytriton/tritonserver/python_backend_stubs/(?P<version>[0-9.]+)/")
# Libraries bundled for a single stub version, named by auditwheel after that version's libpython.
VERSIONED_LIBPYTHON = re.compile(r"^nvidia_pytriton\.libs/libpython3-[0-9a-f]+\.(?P<minor>[0-9]+)\.so")


def dropped(name: str, keep: str) -> bool:
    stub = STUBS.match(name)
    if stub:
        return stub.group("version") != keep
    lib = VERSIONED_LIBPYTHON.match(name)
    return bool(lib) and f"3.{lib.group('minor')}" != keep


def record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def slim(wheel: Path, out_dir: Path, keep: str) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / wheel.name
    if target.resolve() == wheel.resolve():
        raise SystemExit(f"error: {target} would overwrite the original; pick another OUT_DIR")
    with zipfile.ZipFile(wheel) as source:
        names = [i.filename for i in source.infolist()]
        kept_versions = {m.group("version") for n in names if (m := STUBS.match(n))}
        if keep not in kept_versions:
            raise SystemExit(f"error: {wheel.name} has no python backend stub for {keep} "
                             f"(it has {', '.join(sorted(kept_versions))})")
        record_name = next(n for n in names if n.endswith(".dist-info/RECORD"))
        lines = []
        with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as sink:
            for info in source.infolist():
                if info.filename == record_name or dropped(info.filename, keep):
                    continue
                data = source.read(info)
                sink.writestr(info, data, compress_type=zipfile.ZIP_DEFLATED)
                if not info.is_dir():
                    lines.append(record_line(info.filename, data))
            lines.append(f"{record_name},,")
            sink.writestr(source.getinfo(record_name), "\n".join(lines) + "\n", compress_type=zipfile.ZIP_DEFLATED)
    return target


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("wheel", type=Path)
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--python", default="3.12", help="the Python version whose stub stays (default 3.12)")
    args = parser.parse_args(argv)
    target = slim(args.wheel, args.out_dir, args.python)
    print(f"{target} ({target.stat().st_size / 1e6:.1f} MB, was {args.wheel.stat().st_size / 1e6:.1f} MB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
