"""The security phase: restricted-API probes, TLS inspection, malformed-input cases and the search
for leaked secrets."""
