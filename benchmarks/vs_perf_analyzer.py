"""Our load engine against perf_analyzer (Triton's C++ load generator) on the same server, model,
protocol and concurrency, runs alternated, printed side by side with the throughput ratio last.

    python benchmarks/vs_perf_analyzer.py                       # embedded server, identity model, gRPC, c=16
    python benchmarks/vs_perf_analyzer.py --rounds 5 --concurrency 16 --protocol grpc
    python benchmarks/vs_perf_analyzer.py --rounds 4 --protocol grpc,http --concurrency 16,64 --docs
    python benchmarks/vs_perf_analyzer.py --url http://HOST:8000 --grpc-url HOST:8001 --model mymodel

perf_analyzer comes from ../shared/tools/get-perf-analyzer.sh (into .perf_analyzer/, ignored by git).
Client CPU per request is measured alike for both: the tool's user + system CPU seconds over the
whole measurement (perf_analyzer: its process, from getrusage of finished children; the engine:
this process and its worker processes) divided by the requests sent in that time (perf_analyzer:
those of every pass it measured; the engine: every request answered, warm-up included).
Both tools use the same rules: windows of --window-s seconds, stable when the last 3 agree within
10%, at most 10 windows. Each round runs perf_analyzer, then the engine (or the reverse on odd
rounds), so a machine that gets busier or quieter affects both alike.
--docs writes the table of medians, with the machine and its load average, into docs/benchmarks.md
(the section between `<!-- vs_perf_analyzer: begin -->` and `<!-- vs_perf_analyzer: end -->`).
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
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from side_by_side import machine_line, medians, print_table, write_section  # noqa: E402

from pytest_triton_ready.load import LoadEngine, MeasureRules  # noqa: E402
from pytest_triton_ready.load.background import loop_kind, shared_loop  # noqa: E402
from pytest_triton_ready.server.client import TritonClient  # noqa: E402

DEFAULT_REPOSITORY = ROOT / "tests" / "repositories" / "load"
DEFAULT_PERF_ANALYZER = ROOT / ".perf_analyzer" / "perf_analyzer"
DEFAULT_DOCS = ROOT / "docs" / "benchmarks.md"
DOCS_SECTION = "vs_perf_analyzer"


def run_perf_analyzer(binary: Path, model: str, url: str, protocol: str, load: Load, window_s: float,
                      batch_size: int, stability: float = 0.10) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "pa.csv"
        command = [str(binary), "-m", model, "-u", url, "-i", protocol, "-b", str(batch_size),
                   *load.perf_analyzer_args(), "--measurement-interval", str(int(window_s * 1000)),
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


def run_engine(engine: LoadEngine, model: str, protocol: str, load: Load, window_s: float,
               batch_size: int, workers: int | str, stability: float = 0.10) -> dict:
    rules = MeasureRules(warmup_s=window_s / 2, window_s=window_s, max_windows=10, min_duration_s=0, min_requests=1,
                         stability_tolerance=stability)
    started, cpu_before = time.monotonic(), _cpu_s(resource.RUSAGE_SELF) + _cpu_s(resource.RUSAGE_CHILDREN)
    m = engine.measure(model, **load.engine_args(), rules=rules, protocol=protocol, batch_size=batch_size,
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
    parser.add_argument("--protocol", default="grpc", help="grpc, http, or both comma-separated (grpc,http)")
    parser.add_argument("--concurrency", default="16", help="requests in flight: one number or several (16,64)")
    parser.add_argument("--rate", default="",
                        help="requests/s at a constant pace instead (open loop, both tools): one number or several; "
                             "latency at an equal rate, where a faster client cannot load the server harder")
    parser.add_argument("--batch-size", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--window-s", type=float, default=2.0)
    parser.add_argument("--stability", type=float, default=0.10,
                        help="both tools' stability tolerance (perf_analyzer's --stability-percentage / 100); a busy "
                             "machine may need 0.3-0.5 for perf_analyzer to report at all")
    parser.add_argument("--workers", default="auto", help="engine worker processes: a number or auto")
    parser.add_argument("--perf-analyzer", type=Path, default=DEFAULT_PERF_ANALYZER)
    parser.add_argument("--docs", type=Path, nargs="?", const=DEFAULT_DOCS,
                        help=f"write the table of medians into this Markdown file's `{DOCS_SECTION}` section "
                             f"(`{DOCS_SECTION}-paced` with --rate; default {DEFAULT_DOCS.relative_to(ROOT)})")
    args = parser.parse_args(argv)
    if not args.perf_analyzer.exists():
        print(f"perf_analyzer not found at {args.perf_analyzer}: run ../shared/tools/get-perf-analyzer.sh .perf_analyzer",
              file=sys.stderr)
        return 2
    try:
        loads = ([Load("rate", int(r)) for r in _listed(args.rate)] if args.rate
                 else [Load("concurrency", int(c)) for c in _listed(args.concurrency)])
        cases = [(p, load) for p in _listed(args.protocol, ("grpc", "http")) for load in loads]
    except ValueError as exc:
        parser.error(str(exc))
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
    results = []
    try:
        client = TritonClient(http_url, grpc_url)
        engine = LoadEngine(client, grpc_url, http_url)
        for protocol, load in cases:
            pa_url = grpc_url if protocol == "grpc" else http_url.split("://")[-1]
            load_before = os.getloadavg()
            rows = []
            for round_no in range(1, args.rounds + 1):
                order = ("pa", "engine") if round_no % 2 else ("engine", "pa")
                for tool in order:
                    if tool == "pa":
                        row = run_perf_analyzer(args.perf_analyzer, args.model, pa_url, protocol,
                                                load, args.window_s, args.batch_size, args.stability)
                    else:
                        row = run_engine(engine, args.model, protocol, load, args.window_s,
                                         args.batch_size, workers, args.stability)
                    row["round"] = round_no
                    rows.append(row)
                    print(f"{protocol} {load} {_line(row)}", flush=True)
            case = Case(protocol, load, rows, load_before, os.getloadavg())
            _summary(case, args)
            results.append(case)
        client.close()
    finally:
        if launcher is not None:
            launcher.cleanup()
    measured = [case for case in results if case.medians is not None]
    if not measured:
        return 1
    table = markdown_table(measured)
    print()
    print(table)
    if args.docs:
        section = f"{DOCS_SECTION}-paced" if args.rate else DOCS_SECTION
        write_section(args.docs, section, docs_text(measured, args, table))
        print(f"\nwritten into {args.docs} (section {section})")
    return 0 if len(measured) == len(results) else 1


@dataclass(frozen=True)
class Load:
    """What both tools are asked for: `concurrency` requests in flight (closed loop), or `rate`
    requests/s at a constant pace (open loop)."""

    kind: str
    value: int

    def __str__(self) -> str:
        return f"c{self.value}" if self.kind == "concurrency" else f"{self.value}/s"

    def perf_analyzer_args(self) -> list[str]:
        if self.kind == "concurrency":
            return ["--concurrency-range", str(self.value)]
        return ["--request-rate-range", str(self.value), "--request-distribution", "constant"]

    def engine_args(self) -> dict:
        return {"concurrency": self.value} if self.kind == "concurrency" else {"rate": float(self.value),
                                                                                "poisson": False}


@dataclass
class Case:
    """One protocol at one load: every round of both tools, and the load average around them."""

    protocol: str
    load: Load
    rows: list[dict]
    load_before: tuple[float, float, float]
    load_after: tuple[float, float, float]

    @cached_property
    def medians(self) -> dict[str, dict[str, float]] | None:
        return medians(self.rows, KEYS)

    def ratio(self, key: str) -> float:
        med = self.medians
        return med["engine"][key] / med["perf_analyzer"][key]

    def misses(self) -> list[str]:
        """The issue's targets this case falls short of, each with its ratio."""
        return [f"{label} {self.ratio(key):.3f} (target {comparison} {bound:g})"
                for key, label, comparison, bound in TARGETS
                if not (self.ratio(key) >= bound if comparison == ">=" else self.ratio(key) <= bound)]


KEYS = ("throughput", "p50_ms", "p99_ms", "cpu_us")
# engine / perf_analyzer: at least as much throughput, no more client CPU per request, latency within 10%
TARGETS = (("throughput", "throughput", ">=", 1.0), ("cpu_us", "client CPU per request", "<=", 1.0),
           ("p50_ms", "p50", "<=", 1.1), ("p99_ms", "p99", "<=", 1.1))


def _listed(text: str, allowed: tuple[str, ...] | None = None) -> list[str]:
    items = [item.strip() for item in text.split(",") if item.strip()]
    for item in items:
        if allowed is not None and item not in allowed:
            raise ValueError(f"{item!r} is not one of {', '.join(allowed)}")
        if allowed is None and not item.isdigit():
            raise ValueError(f"{item!r} is not a whole number (requests in flight or requests/s)")
    return items


def markdown_table(cases: list[Case]) -> str:
    """One row per case: both tools' medians, the engine's ratios, the load average around it."""
    lines = ["| run | perf_analyzer infer/s | engine infer/s | ratio | p50 pa / engine (ms) | p99 pa / engine (ms) "
             "| CPU us/req pa / engine | load average | targets missed |",
             "| --- | ---: | ---: | ---: | --- | --- | --- | --- | --- |"]
    for case in cases:
        pa, en = case.medians["perf_analyzer"], case.medians["engine"]
        lines.append(
            f"| {'gRPC' if case.protocol == 'grpc' else 'HTTP'} {case.load} | {pa['throughput']:,.0f} "
            f"| {en['throughput']:,.0f} | {case.ratio('throughput'):.2f} "
            f"| {pa['p50_ms']:.2f} / {en['p50_ms']:.2f} ({case.ratio('p50_ms'):.2f}) "
            f"| {pa['p99_ms']:.2f} / {en['p99_ms']:.2f} ({case.ratio('p99_ms'):.2f}) "
            f"| {pa['cpu_us']:.0f} / {en['cpu_us']:.0f} ({case.ratio('cpu_us'):.2f}) "
            f"| {case.load_before[0]:.1f} -> {case.load_after[0]:.1f} | {'; '.join(case.misses()) or 'none'} |")
    return "\n".join(lines)


def docs_text(cases: list[Case], args, table: str) -> str:
    loops = sorted({r.get("loop", "") for case in cases for r in case.rows if r["tool"] == "engine" and r.get("loop")})
    workers = sorted({str(r["workers"]) for case in cases for r in case.rows if r["tool"] == "engine" and "workers" in r})
    load = ("rate", args.rate) if args.rate else ("concurrency", args.concurrency)
    command = "python benchmarks/vs_perf_analyzer.py " + " ".join(
        f"--{k.replace('_', '-')} {v}" for k, v in (("protocol", args.protocol), load,
                                                   ("rounds", args.rounds), ("window_s", f"{args.window_s:g}"),
                                                   ("stability", f"{args.stability:g}"))) + " --docs"
    paced = ", paced requests (open loop)" if args.rate else ""
    return (f"## Latest: the load engine against perf_analyzer{paced} ({time.strftime('%Y-%m-%d')})\n\n"
            f"Written by `{command}` on {machine_line()}; model {args.model}, batch {args.batch_size}, "
            f"{args.rounds} alternated rounds per run, windows of {args.window_s:g} s, both tools stable within "
            f"{args.stability:.0%}; engine event loop {', '.join(loops) or 'n/a'}, worker processes "
            f"{', '.join(workers) or 'n/a'}. Medians of the rounds; ratios are engine / perf_analyzer; the targets are "
            f"throughput >= 1.0, client CPU per request <= 1.0, p50 and p99 <= 1.1. Load average is the 1-minute "
            f"figure before -> after each run.\n\n{table}\n")


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


def _summary(case: Case, args) -> None:
    med = case.medians
    if med is None:
        print(f"{case.protocol} {case.load}: load average {case.load_before[0]:.1f} before, "
              f"{case.load_after[0]:.1f} after on {os.cpu_count()} CPUs")
        return
    print()
    print(f"model {args.model}, {case.protocol}, {case.load.kind} {case.load.value}, batch {args.batch_size}, "
          f"{args.rounds} alternated rounds, windows of {args.window_s:g} s, stable within {args.stability:.0%}; "
          f"load average {case.load_before[0]:.1f} before, {case.load_after[0]:.1f} after on {os.cpu_count()} CPUs")
    print_table(med, {"throughput": "throughput (infer/s)", "p50_ms": "p50 latency (ms)", "p99_ms": "p99 latency (ms)",
                      "cpu_us": "client CPU (us/req)"})
    print(f"targets missed: {'; '.join(case.misses()) or 'none'}")
    print()


if __name__ == "__main__":
    sys.exit(main())
