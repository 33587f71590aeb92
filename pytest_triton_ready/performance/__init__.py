"""The performance phase's procedures (checks/test_performance.py, checks/test_streaming.py):
PERF-1 at the target load (benchmark, target_rules, gpu_load; streaming_target for a decoupled
model), PERF-2's throughput-latency curve (sweep drives the capacity search of curve; server_cpu the
CPU at capacity; streaming_curve and streaming_rules for decoupled models), and which models are
measured with which budget (measured_models). The engine they drive is load/."""
