"""A digest per file of a model as the repository holds it: what soak evidence compares so that a
changed model.py or new weights under the same version number are told apart.

A model's files are every regular file directly in its directory (config.pbtxt, label files) and
every file under each version it serves (READY); versions it does not serve are left out, and so
are the bytecode caches (`__pycache__`) the Python backend writes next to model.py on first load.
A file up to LARGE_FILE_BYTES is digested whole (`sha256:` and the SHA-256 of its bytes). A larger
one (weights, engines) is digested by its size, its modification time (ns) and SAMPLE_BYTES from its
start, middle and end (`sampled:` and the SHA-256 over those): reading 100 GB of weights at each
soak would cost more than the soak, and new weights of the same size almost always differ in time
and in the sampled bytes. A copy that does not keep modification times (`cp` without `-p`) reads
as changed: the comparison errs towards re-soaking.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable
from pathlib import Path

LARGE_FILE_BYTES = 64 * 1024 * 1024  # larger files are digested by size + mtime + samples
SAMPLE_BYTES = 1024 * 1024  # bytes read from the start, middle and end of a large file
SKIPPED_DIRECTORIES = ("__pycache__",)
CHUNK_BYTES = 1024 * 1024


def file_digest(path: Path) -> str:
    """`sha256:HEX` of the whole file, or `sampled:HEX` of a file over LARGE_FILE_BYTES (raises OSError)."""
    stat = path.stat()
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        if stat.st_size <= LARGE_FILE_BYTES:
            while chunk := handle.read(CHUNK_BYTES):
                digest.update(chunk)
            return "sha256:" + digest.hexdigest()
        digest.update(f"{stat.st_size}:{stat.st_mtime_ns}".encode())
        for offset in (0, (stat.st_size - SAMPLE_BYTES) // 2, stat.st_size - SAMPLE_BYTES):
            handle.seek(offset)
            digest.update(handle.read(SAMPLE_BYTES))
    return "sampled:" + digest.hexdigest()


def model_files(model_dir: Path, versions: Iterable[str]) -> dict[str, str]:
    """Path relative to `model_dir` (POSIX) -> digest, for the model's own files and every file
    under the `versions` it serves. Raises OSError naming the path that cannot be read (a missing
    model or version directory included)."""
    if not model_dir.is_dir():
        raise FileNotFoundError(f"{model_dir}: no such directory")
    files = {p.name: file_digest(p) for p in sorted(model_dir.iterdir()) if p.is_file()}
    for version in sorted(versions):
        top = model_dir / version
        if not top.is_dir():
            raise FileNotFoundError(f"{top}: no such directory (version {version} is READY)")
        for root, directories, names in os.walk(top, onerror=_raise):
            directories[:] = sorted(d for d in directories if d not in SKIPPED_DIRECTORIES)
            for name in sorted(names):
                path = Path(root) / name
                files[path.relative_to(model_dir).as_posix()] = file_digest(path)
    return files


def _raise(error: OSError) -> None:
    raise error
