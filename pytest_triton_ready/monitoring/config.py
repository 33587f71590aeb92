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

from ..yamlschema import Section, setting


class LogShipping(Section):
    collector: str | None = setting(None, "what ships the logs (shown in the report)")
    stdout: bool | None = setting(None, "the collector reads the server's stdout/stderr")
    files: list[str] | None = setting(None, "server-side log files the collector tails")


class MonitoringSection(Section):
    """`monitoring:`: alert rules, dashboard and log shipping (MON-2..4)."""

    alert_rules: list[str] = setting(list, "Prometheus rule files (relative to the YAML file)")
    dashboard: str | None = setting(None, "Grafana dashboard JSON (relative to the YAML file)")
    log_shipping: LogShipping | None = setting(None, "how the server's logs reach an aggregator")
    prometheus: str | None = setting(None, "the prometheus binary (default: prometheus on PATH)")
    promtool: str | None = setting(None, "the promtool binary (default: promtool on PATH)")


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
        section = settings.section_model("monitoring")
        base = settings.config_file.resolve().parent if settings.config_file else Path.cwd()

        def resolve(text: str | None) -> Path | None:
            return None if not text else (base / Path(text).expanduser()).resolve()

        shipping = section.log_shipping.model_dump(exclude_unset=True) if section.log_shipping else {}
        return cls(
            alert_rules=[resolve(p) for p in section.alert_rules],
            dashboard=resolve(section.dashboard),
            log_shipping=shipping,
            prometheus=str(resolve(section.prometheus)) if section.prometheus else None,
            promtool=str(resolve(section.promtool)) if section.promtool else None,
            source=f"yaml:{settings.config_file}" if section.model_fields_set else "no monitoring section",
        )
