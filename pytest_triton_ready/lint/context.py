"""What the lint rules know beyond a config: the `lint:` YAML section, SLOs and thresholds."""

from __future__ import annotations

from collections.abc import Iterable

from .engine import LintContext


def lint_context(settings, models: Iterable[str]) -> LintContext:
    """A LintContext for `models` from the settings (YAML `lint:` section, SLOs, thresholds)."""
    section = settings.section_model("lint")
    models = list(models)
    slos = {m: settings.slo_for(m) for m in models}
    return LintContext(
        slo_p99_ms={m: s.p99_ms for m, s in slos.items() if s.p99_ms is not None},
        min_throughput={m: s.min_throughput for m, s in slos.items() if s.min_throughput},
        nondeterministic_models=set(section.nondeterministic_models),
        stateful_models=set(section.stateful_models),
        preferred_batch_size_models=set(section.preferred_batch_size_models),
        rollouts=dict(section.rollout),
        queue_delay_budget_fraction=settings.threshold("queue_delay_budget_fraction").value,
    )


def disabled_rules(settings) -> list[str]:
    return list(settings.section_model("lint").disable)
