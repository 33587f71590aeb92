"""The server facade: what a Triton server answers and how to read it (the HTTP/gRPC client, its
Prometheus metrics, GPU readings, the models it serves, ensemble and BLS pipelines, its log, its API
categories). Everything above it reads the server through here; it imports nothing above it."""
