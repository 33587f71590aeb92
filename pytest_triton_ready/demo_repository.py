"""A copy of the demo model repository with every instance group on one kind: KIND_GPU where a GPU
can run the models, KIND_CPU elsewhere. The GPU evidence script (scripts/gpu-check.sh) serves it.

    python -m pytest_triton_ready.demo_repository DEST [--kind=auto|gpu|cpu] [--gpus=0,1]

Configs are rewritten through Triton's own ModelConfig protobuf (tritonclient's model_config_pb2
and protobuf text_format), so a kind or GPU list can never produce a config the server rejects for
its syntax. Every demo model has a GPU path (torch through DLPack) for KIND_GPU instances.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path

from .launchers.embedded import DEMO_REPOSITORY

INSTANCE_KINDS = {"gpu": "KIND_GPU", "cpu": "KIND_CPU"}


def gpu_kind_available() -> tuple[bool, str]:
    """Whether KIND_GPU instances of the demo models can run here, and why (or why not): NVML must
    see a GPU and torch (what the models' GPU path uses) must reach CUDA."""
    try:
        import pynvml
    except ImportError:
        return False, "nvidia-ml-py is not installed, so no GPU can be seen"
    try:
        pynvml.nvmlInit()
        try:
            count = pynvml.nvmlDeviceGetCount()
            names = [_text(pynvml.nvmlDeviceGetName(pynvml.nvmlDeviceGetHandleByIndex(i))) for i in range(count)]
        finally:
            pynvml.nvmlShutdown()
    except pynvml.NVMLError as exc:
        return False, f"NVML could not start ({exc}): no NVIDIA GPU or driver here"
    if not names:
        return False, "NVML sees no GPU"
    try:
        import torch
    except ImportError:
        return False, f"{count} GPU(s) ({', '.join(names)}) but torch is not installed; the models' GPU path needs it"
    if not torch.cuda.is_available():
        return False, f"{count} GPU(s) ({', '.join(names)}) but torch {torch.__version__} cannot reach CUDA"
    return True, f"{count} GPU(s): {', '.join(names)}; torch {torch.__version__} with CUDA {torch.version.cuda}"


def set_instance_kind(config_text: str, kind: str, gpus: Sequence[int] = ()) -> str:
    """The config with every instance group set to `kind` (a ModelInstanceGroup.Kind name); `gpus`
    pins KIND_GPU groups to those devices. A config without instance groups gets one."""
    from google.protobuf import text_format
    from tritonclient.grpc import model_config_pb2

    config = text_format.Parse(config_text, model_config_pb2.ModelConfig())
    kind_value = model_config_pb2.ModelInstanceGroup.Kind.Value(kind)
    if not config.instance_group:
        config.instance_group.add(count=1)
    for group in config.instance_group:
        group.kind = kind_value
        del group.gpus[:]
        if kind == "KIND_GPU" and gpus:
            group.gpus.extend(gpus)
    return text_format.MessageToString(config)


def write_demo_repository(dest: Path, kind: str, gpus: Sequence[int] = (), source: Path = DEMO_REPOSITORY) -> list[str]:
    """Copy the demo repository to `dest` (replacing it) with every instance group on `kind`;
    returns the models written."""
    dest = Path(dest)
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(source, dest, ignore=shutil.ignore_patterns("__pycache__"))
    models = []
    for config_path in sorted(dest.glob("*/config.pbtxt")):
        config_path.write_text(set_instance_kind(config_path.read_text(), kind, gpus))
        models.append(config_path.parent.name)
    return models


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pytest_triton_ready.demo_repository", description=__doc__.split("\n\n")[0])
    parser.add_argument("dest", type=Path, help="directory to write the repository to (replaced)")
    parser.add_argument("--kind", choices=("auto", *INSTANCE_KINDS), default="auto",
                        help="instance kind: gpu, cpu, or auto (gpu when a GPU and torch with CUDA are here)")
    parser.add_argument("--gpus", default="", help="comma-separated GPU indices for KIND_GPU groups (default: all)")
    args = parser.parse_args(argv)
    try:
        gpus = [int(g) for g in args.gpus.split(",") if g.strip()]
    except ValueError:
        parser.error(f"--gpus: expected indices like 0,1, got {args.gpus!r}")
    available, why = gpu_kind_available() if args.kind != "cpu" else (False, "KIND_CPU asked for")
    if args.kind == "gpu" and not available:
        print(f"error: --kind=gpu, but {why}", file=sys.stderr)
        return 2
    kind = "KIND_GPU" if available else "KIND_CPU"
    models = write_demo_repository(args.dest, kind, gpus)
    print(f"{kind}: {', '.join(models)} in {args.dest} ({why})")
    return 0


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


if __name__ == "__main__":
    sys.exit(main())
