"""The deployment under test: a team's manifests (Kubernetes, KServe, compose) read and held against what the run measured."""

DEFAULT_KUBERNETES_VERSION = "1.30.0"  # the manifests are validated against this version's schemas unless told
