"""The root of every error this package raises on purpose: `except TritonReadyError` catches them
all. Each error's message is one readable line naming the cause and where it came from."""

from __future__ import annotations


class TritonReadyError(Exception):
    """An error of pytest-triton-ready (a bad setting, a server that cannot be reached or
    started, a refused action, a broken file); its subclasses keep their own names."""
