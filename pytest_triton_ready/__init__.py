"""pytest-triton-ready: a pytest plugin and checklist for production readiness of Triton servers."""

__version__ = "0.1.0"
