"""The monitoring phase's machinery: the four metric layers' live values (layers), Triton's metric
catalogue (catalogue), PromQL parsing (promql), Prometheus rule files (rule_files), whether a referenced
metric exists (references), a real Prometheus on loopback (prometheus), Grafana dashboards
(dashboard) and logging fitness (logging_policy). Checks import the module they need."""
