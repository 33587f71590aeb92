"""pytest-triton-ready: a pytest plugin and checklist for production readiness of Triton servers.

PYTEST_DONT_REWRITE: this module holds no assertion. `triton-ready` and `python -m
pytest_triton_ready.cli` import it before pytest starts, and pytest marks an installed plugin's
package for assertion rewriting only then; the marker tells pytest that this module needs no
rewriting, so it does not warn that it came too late. Every submodule (the plugin, the checks) is
still imported afterwards and rewritten as usual.
"""

__version__ = "0.1.0"
