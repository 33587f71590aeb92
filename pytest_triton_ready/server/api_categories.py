"""Triton's API categories, as its restricted-API flags name them, and those a production server keeps
behind a key (SEC-1 probes them; the deployment check reads them from the manifest's arguments)."""

# Triton's names (--http-restricted-api / --grpc-restricted-protocol).
API_CATEGORIES = ("health", "metadata", "inference", "shared-memory", "model-config", "model-repository",
                  "statistics", "trace", "logging")
REQUIRED_BY_DEFAULT = ("model-repository", "shared-memory", "logging", "trace")
