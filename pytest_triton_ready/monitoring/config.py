"""The YAML `monitoring:` section as the monitoring checks use it; file paths are resolved against
the YAML file's directory.

    monitoring:
      alert_rules: [alerts.yaml]          # Prometheus rule files
      dashboard: dashboard.json           # Grafana dashboard JSON
      log_shipping: {collector: fluent-bit, stdout: true, files: [/var/log/triton/server.log]}
      prometheus: /usr/bin/prometheus     # optional; default: prometheus on PATH
      promtool: /usr/bin/promtool         # optional; default: promtool on PATH
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SCHEMA: dict[str, Any] = {
    "alert_rules": [str],
    "dashboard": str,
    "log_shipping": {"collector": str, "stdout": bool, "files": [str]},
    "prometheus": str,
    "promtool": str,
}


@dataclass
class MonitoringSettings:
    alert_rules: list[Path] = field(default_factory=list)
    dashboard: Path | None = None
    log_shipping: dict[str, Any] = field(default_factory=dict)
    prometheus: str | None = None
    promtool: str | None = None
    source: str = "no monitoring section"

    @classmethod
    def from_settings(cls, settings) -> MonitoringSettings:
        section = settings.section("monitoring")
        base = settings.config_file.resolve().parent if settings.config_file else Path.cwd()

        def resolve(text: str | None) -> Path | None:
            return None if not text else (base / Path(text).expanduser()).resolve()

        return cls(
            alert_rules=[resolve(p) for p in section.get("alert_rules") or []],
            dashboard=resolve(section.get("dashboard")),
            log_shipping=dict(section.get("log_shipping") or {}),
            prometheus=str(resolve(section["prometheus"])) if section.get("prometheus") else None,
            promtool=str(resolve(section["promtool"])) if section.get("promtool") else None,
            source=f"yaml:{settings.config_file}" if section else "no monitoring section",
        )
