"""The YAML section `operations:` (see docs/operations-security.md)."""

from __future__ import annotations

import datetime as dt

from ..yamlschema import MapOf

ATTESTATION_SCHEMA = {"link": str, "owner": str, "date": dt.date}

OPERATIONS_SCHEMA = {
    "attestations": {
        "hot_update_runbook": ATTESTATION_SCHEMA,
        "disaster_recovery": ATTESTATION_SCHEMA,
        "team_training": ATTESTATION_SCHEMA,
    },
    "capacity": {
        "peak_rate": MapOf(float),
        "fleet": {"gpus": int, "instances_per_gpu": MapOf(int), "placement": str},
    },
}
