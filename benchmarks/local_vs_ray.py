"""Local load workers against Ray load workers on the same server, model and concurrency, rounds
alternated (local first on even rounds, Ray first on odd ones), with the throughput ratio last.

    python benchmarks/local_vs_ray.py                        # embedded server (identity), 2-node Ray cluster here
    python benchmarks/local_vs_ray.py --rounds 5 --concurrency 16
    python benchmarks/local_vs_ray.py --url http://HOST:8000 --grpc-url HOST:8001 --cluster ray://HEAD:10001

Without --cluster a two-node Ray cluster is started on this machine (tests/ray_cluster.py) and its
processes' resident memory and CPU time are reported. Ray's added cost per request is read two
ways: the client CPU per request (the worker processes' CPU over their requests) and the p50
latency, Ray minus local.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from pytest_triton_ready.load import LoadEngine, MeasureRules  # noqa: E402
from pytest_triton_ready.server.client import TritonClient  # noqa: E402

DEFAULT_REPOSITORY = ROOT / "tests" / "repositories" / "load"


class Settings:
    """Just what LoadEngine.measure reads: the cluster address (None: local workers)."""

    def __init__(self, cluster: str | None) -> None:
        self.triton_load_cluster = cluster

    def threshold(self, name: str):
        raise KeyError(name)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url"), parser.add_argument("--grpc-url")
    parser.add_argument("--cluster", help="Ray address; default: a two-node cluster started here")
    parser.add_argument("--model", default="identity")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--window-s", type=float, default=2.0)
    args = parser.parse_args()

    launcher = cluster = None
    if not args.url:
        from pytest_triton_ready.launchers.embedded import EmbeddedLauncher

        launcher = EmbeddedLauncher(DEFAULT_REPOSITORY)
        endpoints = launcher.start()
        http_url, grpc_url = endpoints.http_url, endpoints.grpc_url
    else:
        http_url, grpc_url = args.url, args.grpc_url or args.url.split("://")[-1].rsplit(":", 1)[0] + ":8001"
    address = args.cluster
    try:
        if address is None:
            from ray_cluster import RayCluster

            cluster = RayCluster(nodes=2).start()
            address = cluster.address
        client = TritonClient(http_url, grpc_url)
        rules = MeasureRules(warmup_s=1.0, window_s=args.window_s, min_duration_s=3 * args.window_s,
                             min_requests=200, max_windows=10)
        engines = {"local": LoadEngine(client, grpc_url, http_url, settings=Settings(None)),
                   "ray": LoadEngine(client, grpc_url, http_url, settings=Settings(address))}
        results: dict[str, list] = {"local": [], "ray": []}
        idle = cluster.usage() if cluster else None
        peak_rss = 0.0
        for round_ in range(args.rounds):
            order = ("local", "ray") if round_ % 2 == 0 else ("ray", "local")
            for kind in order:
                measured = engines[kind].measure(args.model, concurrency=args.concurrency, rules=rules,
                                                 server_stats=False)
                if cluster:
                    peak_rss = max(peak_rss, cluster.usage()["rss_mb"])
                s = measured.stats
                results[kind].append(measured)
                print(f"round {round_ + 1} {kind:5s}: {s.throughput_infer_s:8.1f} infer/s  p50 {s.p50_ms:.3f} ms  "
                      f"p99 {s.p99_ms:.3f} ms  client CPU {s.client_cpu_us_per_request or 0:.0f} us/request  "
                      f"workers {measured.workers}  {'stable' if measured.trustworthy else measured.problem()}",
                      flush=True)
                if kind == "ray" and measured.cluster:
                    offsets = ", ".join(f"{w['node_ip']} {w['offset_s'] * 1e3:+.3f} ms" for w in measured.cluster["workers"])
                    print(f"          clock offsets: {offsets}", flush=True)
        after = cluster.usage() if cluster else None

        def median(kind: str, get) -> float:
            values = [get(m) for m in results[kind] if get(m) is not None]
            return statistics.median(values) if values else float("nan")

        local_t = median("local", lambda m: m.stats.throughput_infer_s)
        ray_t = median("ray", lambda m: m.stats.throughput_infer_s)
        cpu = median("ray", lambda m: m.stats.client_cpu_us_per_request) - median(
            "local", lambda m: m.stats.client_cpu_us_per_request)
        p50 = median("ray", lambda m: m.stats.p50_ms) - median("local", lambda m: m.stats.p50_ms)
        print(f"\nmodel {args.model}, concurrency {args.concurrency}, {args.rounds} rounds, medians:")
        print(f"local workers: {local_t:.1f} infer/s; Ray workers: {ray_t:.1f} infer/s")
        print(f"Ray's added cost per request: client CPU {cpu:+.1f} us, p50 latency {p50 * 1000:+.1f} us")
        if idle is not None:
            print(f"Ray processes on this machine: {after['processes']} processes, resident memory "
                  f"{idle['rss_mb']:.0f} MB idle, {peak_rss:.0f} MB peak; CPU time {after['cpu_s']:.1f} s "
                  f"(of which {after['cpu_s'] - idle['cpu_s']:.1f} s during the measurements)")
        print(f"throughput ratio Ray / local: {ray_t / local_t:.3f}")
    finally:
        if cluster is not None:
            try:
                import ray

                ray.shutdown()
            finally:
                cluster.stop()
        if launcher is not None:
            launcher.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
