"""The deployment under test: a team's manifests (Kubernetes, KServe, compose) read and held against what the run measured."""
