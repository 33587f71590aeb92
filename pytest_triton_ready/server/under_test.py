"""What a check is handed as the server under test (the `triton` fixture): the shape every
phase reads, so that none of them names the run's own `Target` class (target.py), which sits above
them."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from .client import TritonClient
from .metrics import MetricsSnapshot
from .models import InitialState

if TYPE_CHECKING:
    from ..launchers import Endpoints, Launcher
    from ..settings import Settings


class ServerUnderTest(Protocol):
    """The server under test: `client` talks to it, `launcher` owns (or only points at) its process."""

    settings: Settings
    launcher: Launcher
    endpoints: Endpoints
    client: TritonClient
    initial_state: InitialState

    @property
    def owns_process(self) -> bool: ...

    def models(self) -> list[str]: ...

    def scrape_metrics(self) -> MetricsSnapshot: ...

    def server_log(self, max_lines: int = 200) -> str: ...
