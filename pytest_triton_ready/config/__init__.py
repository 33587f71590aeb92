"""The configuration phase's live procedures, beside the static rules of lint/: CFG-2's batching at
saturation (batching_stress, its advice in batching) and --triton-tune-batching (tuning), and CFG-1
for a decoupled model (streaming_answers: a real streamed request answered as declared), CFG-3's
version policy against the server (versions) and CFG-4's memory readings (resources)."""
