"""Our load engine against perf_analyzer (Triton's C++ load generator) on the same server, model,
protocol and concurrency, runs alternated, printed side by side with the throughput ratio last.

    python benchmarks/vs_perf_analyzer.py                       # embedded server, identity model, gRPC, c=16
    python benchmarks/vs_perf_analyzer.py --rounds 5 --concurrency 16 --protocol grpc
    python benchmarks/vs_perf_analyzer.py --url http://HOST:8000 --grpc-url HOST:8001 --model mymodel

perf_analyzer comes from ../shared/tools/get-perf-analyzer.sh (into .perf_analyzer/, ignored by git).
Client CPU per request is measured alike for both: the tool's user + system CPU seconds over the
whole measurement (perf_analyzer: its process, from getrusage of finished children; the engine:
this process and its worker processes) divided by the requests sent in that time (perf_analyzer:
those of every pass it measured; the engine: every request answered, warm-up included).
Both tools use the same rules: windows of --window-s seconds, stable when the last 3 agree within
10%, at most 10 windows. Each round runs perf_analyzer, then the engine (or the reverse on odd
rounds), so a machine that gets busier or quieter affects both alike.
"""

from __future__ import annotations

import argparse
import csv
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from side_by_side import medians, print_table  # noqa: E402

from pytest_triton_ready.load import LoadEngine, MeasureRules  # noqa: E402
from pytest_triton_ready.load.background import loop_kind, shared_loop  # noqa: E402
from pytest_triton_ready.server.client import TritonClient  # noqa: E402

DEFAULT_REPOSITORY = ROOT / "tests" / "repositories" / "load"
DEFAULT_PERF_ANALYZER = ROOT / ".perf_analyzer" / "perf_analyzer"


def run_perf_analyzer(binary: Path, model: str, url: str, protocol: str, concurrency: int, window_s: float,
                      batch_size: int, stability: float = 0.10) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "pa.csv"
        command = [str(binary), "-m", model, "-u", url, "-i", protocol, "-b", str(batch_size),
                   "--concurrency-range", str(concurrency), "--measurement-interval", str(int(window_s * 1000)),
                   "--stability-percentage", f"{stability * 100:g}", "--max-trials", "10", "-f", str(out),
                   "-v"]  # -v: a line per pass, whose throughputs count the requests for the CPU per request
        started, cpu_before = time.monotonic(), _cpu_s(resource.RUSAGE_CHILDREN)
        proc = subprocess.run(command, capture_output=True, text=True, timeout=300)
        elapsed, cpu_s = time.monotonic() - started, _cpu_s(resource.RUSAGE_CHILDREN) - cpu_before
        if proc.returncode != 0 or not out.exists():
            tail = (proc.stdout + proc.stderr).strip().splitlines()[-3:]
            return {"tool": "perf_analyzer", "error": " | ".join(tail) or f"exit {proc.returncode}"}
        row = next(csv.DictReader(out.open()))
    stable = "unstable" not in proc.stdout.lower() and "failed to obtain stable" not in proc.stdout.lower()
    # requests over every pass it measured: each pass's throughput over one window, in requests
    passes = [float(x) for x in re.findall(r"Pass \[\d+\] throughput: ([\d.]+) infer/sec", proc.stdout)]
    requests = sum(passes) * window_s / batch_size
    return {"tool": "perf_analyzer", "throughput": float(row["Inferences/Second"]),
            "p50_ms": float(row["p50 latency"]) / 1000, "p99_ms": float(row["p99 latency"]) / 1000,
            "stable": stable, "wall_s": elapsed, "cpu_us": cpu_s * 1e6 / requests if requests else float("nan")}


def run_engine(engine: LoadEngine, model: str, protocol: str, concurrency: int, window_s: float,
               batch_size: int, workers: int | str, stability: float = 0.10) -> dict:
    rules = MeasureRules(warmup_s=window_s / 2, window_s=window_s, max_windows=10, min_duration_s=0, min_requests=1,
                         stability_tolerance=stability)
    started, cpu_before = time.monotonic(), _cpu_s(resource.RUSAGE_SELF) + _cpu_s(resource.RUSAGE_CHILDREN)
    m = engine.measure(model, concurrency=concurrency, rules=rules, protocol=protocol, batch_size=batch_size,
                       server_stats=False, workers=workers)
    cpu_s = _cpu_s(resource.RUSAGE_SELF) + _cpu_s(resource.RUSAGE_CHILDREN) - cpu_before
    requests = engine_requests(m)
    return {"tool": "engine", "throughput": m.stats.throughput_infer_s * batch_size, "p50_ms": m.stats.p50_ms,
            "p99_ms": m.stats.p99_ms, "stable": m.stable, "wall_s": time.monotonic() - started,
            "workers": m.workers, "cpu_us": cpu_s * 1e6 / requests if requests else float("nan"),
            "own_cpu_us": m.stats.client_cpu_us_per_request, "lag_max_ms": m.stats.loop_lag_max_ms,
            "lag_p99_ms": m.stats.loop_lag_p99_ms, "loop": loop_kind(shared_loop())}


def engine_requests(m) -> int:
    """The requests the engine's CPU was spent on: every answer and error from the first request on,
    warm-up included (its CPU is in the measurement too), else the requests of its windows."""
    completed = getattr(m.traffic, "completed", 0) if m.traffic is not None else 0
    return completed or sum(w.stats.attempted for w in m.windows)


def _cpu_s(who: int) -> float:
    """User + system CPU seconds of this process (RUSAGE_SELF, every thread) or of its finished
    children (RUSAGE_CHILDREN: perf_analyzer, or the engine's worker processes once joined)."""
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="identity")
    parser.add_argument("--repository", type=Path, default=DEFAULT_REPOSITORY, help="served by an embedded server")
    parser.add_argument("--url", help="attach to this HTTP URL instead of starting an embedded server")
    parser.add_argument("--grpc-url", help="gRPC host:port when attaching (default: same host, 8001)")
    parser.add_argument("--protocol", choices=("grpc", "http"), default="grpc")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--batch-size", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--window-s", type=float, default=2.0)
    parser.add_argument("--stability", type=float, default=0.10,
                        help="both tools' stability tolerance (perf_analyzer's --stability-percentage / 100); a busy "
                             "machine may need 0.3-0.5 for perf_analyzer to report at all")
    parser.add_argument("--workers", default="auto", help="engine worker processes: a number or auto")
    parser.add_argument("--perf-analyzer", type=Path, default=DEFAULT_PERF_ANALYZER)
    args = parser.parse_args(argv)
    if not args.perf_analyzer.exists():
        print(f"perf_analyzer not found at {args.perf_analyzer}: run ../shared/tools/get-perf-analyzer.sh .perf_analyzer",
              file=sys.stderr)
        return 2
    workers = args.workers if args.workers == "auto" else int(args.workers)

    launcher = None
    if args.url:
        http_url = args.url
        grpc_url = args.grpc_url or f"{http_url.split('://')[-1].rsplit(':', 1)[0]}:8001"
    else:
        from pytest_triton_ready.launchers.embedded import EmbeddedLauncher

        launcher = EmbeddedLauncher(args.repository)
        endpoints = launcher.start()
        http_url, grpc_url = endpoints.http_url, endpoints.grpc_url
    try:
        client = TritonClient(http_url, grpc_url)
        engine = LoadEngine(client, grpc_url, http_url)
        pa_url = grpc_url if args.protocol == "grpc" else http_url.split("://")[-1]
        load_before = os.getloadavg()
        rows = []
        for round_no in range(1, args.rounds + 1):
            order = ("pa", "engine") if round_no % 2 else ("engine", "pa")
            for tool in order:
                if tool == "pa":
                    row = run_perf_analyzer(args.perf_analyzer, args.model, pa_url, args.protocol,
                                            args.concurrency, args.window_s, args.batch_size, args.stability)
                else:
                    row = run_engine(engine, args.model, args.protocol, args.concurrency, args.window_s,
                                     args.batch_size, workers, args.stability)
                row["round"] = round_no
                rows.append(row)
                print(_line(row), flush=True)
        load_after = os.getloadavg()
        client.close()
    finally:
        if launcher is not None:
            launcher.cleanup()
    return _summary(rows, args, load_before, load_after)


def _line(row: dict) -> str:
    if "error" in row:
        return f"round {row['round']}  {row['tool']:<14} ERROR {row['error']}"
    extra = f"  client CPU {row['cpu_us']:.0f} us/req"
    if row["tool"] == "engine":
        extra += f"  workers {row['workers']}  (engine's own count: {row.get('own_cpu_us') or float('nan'):.0f} us/req)"
        if row.get("lag_max_ms") is not None:  # the engine's own health: its event loop's lag (load/client_health.py)
            extra += f"  {row['loop']} lag p99/max {row['lag_p99_ms']:.1f}/{row['lag_max_ms']:.1f} ms"
    return (f"round {row['round']}  {row['tool']:<14} {row['throughput']:>9.1f} infer/s  p50 {row['p50_ms']:>7.3f} ms  "
            f"p99 {row['p99_ms']:>7.3f} ms  {'stable' if row['stable'] else 'UNSTABLE'}{extra}")


def _summary(rows: list[dict], args, load_before, load_after) -> int:
    med = medians(rows, ("throughput", "p50_ms", "p99_ms", "cpu_us"))
    if med is None:
        print(f"load average {load_before[0]:.1f} before, {load_after[0]:.1f} after on {os.cpu_count()} CPUs")
        return 1
    print()
    print(f"model {args.model}, {args.protocol}, concurrency {args.concurrency}, batch {args.batch_size}, "
          f"{args.rounds} alternated rounds, windows of {args.window_s:g} s, stable within {args.stability:.0%}; "
          f"load average {load_before[0]:.1f} before, {load_after[0]:.1f} after on {os.cpu_count()} CPUs")
    print_table(med, {"throughput": "throughput (infer/s)", "p50_ms": "p50 latency (ms)", "p99_ms": "p99 latency (ms)",
                      "cpu_us": "client CPU (us/req)"})
    ratio = med["engine"]["throughput"] / med["perf_analyzer"]["throughput"]
    p50_diff = med["engine"]["p50_ms"] / med["perf_analyzer"]["p50_ms"] - 1
    print(f"p50 difference: {p50_diff:+.1%} (target within 10%)")
    print(f"throughput ratio engine/perf_analyzer: {ratio:.3f} (target >= 0.95)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
