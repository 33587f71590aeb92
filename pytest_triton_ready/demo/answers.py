"""The demo `generate` model's answers (pytest_triton_ready/demo/streaming/generate/1/model.py), for
the demo's own tests and its `expectations:`."""

from __future__ import annotations

import zlib

VOCABULARY = ("the", "a", "model", "serves", "tokens", "fast", "and", "every", "request", "ends",
              "with", "final", "flag", "stream", "of", "words", "on", "cpu", "triton", "ready")


def expected_tokens(prompt: str | bytes, count: int) -> list[str]:
    """The tokens the demo `generate` model answers to `prompt`."""
    data = prompt.encode() if isinstance(prompt, str) else prompt
    return [VOCABULARY[(zlib.crc32(data) + 7 * i + i * i) % len(VOCABULARY)] for i in range(count)]
