"""What a Triton release changed that a check depends on: its version as numbers, and which ready
endpoints show a dead python stub from which release."""

from __future__ import annotations


def version_tuple(version: str) -> tuple[int, ...]:
    parts = []
    for piece in str(version).split("."):
        digits = "".join(ch for ch in piece if ch.isdigit())
        if not digits:
            break
        parts.append(int(digits))
    return tuple(parts)


def readiness_gates(version: str) -> dict[str, bool]:
    """Which ready endpoints can show a dead python stub on this Triton release: model readiness
    from 2.64 (25.12), strict server readiness from 2.68 (26.04)."""
    v = version_tuple(version)
    return {"model ready shows a dead stub": v >= (2, 64), "server ready shows a dead stub": v >= (2, 68)}
