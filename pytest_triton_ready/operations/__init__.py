"""The operations phase: attestations of what a machine cannot prove (runbooks, drills, training)
and the capacity plan computed from PERF-2's measurements."""
