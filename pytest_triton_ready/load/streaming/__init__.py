"""The load engine's streaming mode, for decoupled models over gRPC ModelStreamInfer: the traffic
(traffic: StreamingLoad, one bidirectional stream per virtual user), the requests and responses
(requests: StreamingPlan; single: one request at a time for correctness checks; sse: HTTP
generate_stream), what a measurement counts (stats), its confidence intervals (confidence), when it
stops (looks), its worker processes (workers: StreamWorkers), and the guarded front door every
streaming check goes through (run: StreamingRun).
Checks import the module they need."""
