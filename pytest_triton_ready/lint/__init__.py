"""Static rules on a deployment's configuration.

`modelconfig` reads configs (files or the live server) into tritonclient's ModelConfig message;
`engine` is the rule engine and `model_rules` the model-config rules; `context` builds what the rules
know from the settings; `model_memory` serves CFG-4 and the instance-count rule. The live readings
of CFG-3 and CFG-4 are in config/ (`versions`, `resources`).
"""

from . import ensemble_rules, model_rules  # noqa: E402,F401  (registers the rules in RULES)
from .engine import RULES, LintContext, LintFinding, UnknownRule, Violation, lint, rule
from .modelconfig import ConfigSyntaxError, ModelSource, read_repository, source_from_server

__all__ = ["RULES", "LintContext", "LintFinding", "UnknownRule", "Violation", "lint", "rule",
           "ConfigSyntaxError", "ModelSource", "read_repository", "source_from_server"]
