"""The streaming engine (gRPC ModelStreamInfer, pytest_triton_ready/load/streaming/traffic.py) against
perf_analyzer's `--streaming` mode on the same decoupled model, server and concurrency: responses/s
and time to first token side by side, the responses/s ratio printed last.

    python benchmarks/vs_perf_analyzer_streaming.py                  # embedded server, demo `generate`, c=8
    python benchmarks/vs_perf_analyzer_streaming.py --rounds 5 --concurrency 16 --max-tokens 64
    python benchmarks/vs_perf_analyzer_streaming.py --delays 0,0     # no model delays: the clients' own limit
    python benchmarks/vs_perf_analyzer_streaming.py --rounds 4 --docs  # the table into docs/benchmarks.md
    python benchmarks/vs_perf_analyzer_streaming.py --url http://HOST:8000 --grpc-url HOST:8001 --model generate

perf_analyzer comes from ../shared/tools/get-perf-analyzer.sh (into .perf_analyzer/, ignored by git).
Both send the same kind of request (a different prompt each time, MAX_TOKENS tokens asked) with one
request in flight per stream. perf_analyzer's numbers come from its profile export (each request's
send time and response times, as genai-perf reads them) over its measurement windows; the engine's
from its own per-request records over the same length of time after a warm-up. Rounds alternate
which tool goes first, so a machine that gets busier or quieter affects both alike.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from side_by_side import machine_line, medians, print_table, write_section  # noqa: E402

from pytest_triton_ready.load.streaming.requests import StreamingPlan  # noqa: E402
from pytest_triton_ready.load.streaming.traffic import STREAMING_DEMO_REPOSITORY, StreamingLoad, default_prompts  # noqa: E402
from pytest_triton_ready.server.client import TritonClient  # noqa: E402

DEFAULT_PERF_ANALYZER = ROOT / ".perf_analyzer" / "perf_analyzer"
DEFAULT_DOCS = ROOT / "docs" / "benchmarks.md"
PERF_ANALYZER_TIMEOUT_S = 180
DOCS_SECTION = "vs_perf_analyzer-streaming"
KEYS = ("responses_per_s", "requests_per_s", "ttft_p50_ms", "ttft_p99_ms", "latency_p50_ms")
LABELS = {"responses_per_s": "responses/s", "requests_per_s": "requests/s", "ttft_p50_ms": "TTFT p50 (ms)",
          "ttft_p99_ms": "TTFT p99 (ms)", "latency_p50_ms": "request latency p50 (ms)"}


def _percentile(values: list[float], p: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, int(round(p / 100 * len(ordered) + 0.5)) - 1))]


def input_file(plan: StreamingPlan, max_tokens: int, count: int, directory: Path) -> Path:
    """perf_analyzer --input-data: `count` different prompts, each asking for `max_tokens`."""
    prompts = default_prompts(max_tokens, seed=1)
    rows = []
    for n in range(count):
        prompt, budget = prompts(n)
        row = {}
        if plan.prompt_input:
            row[plan.prompt_input] = [prompt]
        if plan.max_tokens_input:
            row[plan.max_tokens_input] = [budget]
        rows.append(row)
    path = directory / "inputs.json"
    path.write_text(json.dumps({"data": rows}))
    return path


def run_perf_analyzer(binary: Path, model: str, grpc_url: str, concurrency: int, window_s: float,
                      inputs: Path) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        export = Path(tmp) / "profile.json"
        command = [str(binary), "-m", model, "-u", grpc_url, "-i", "grpc", "--streaming",
                   "--concurrency-range", str(concurrency), "--measurement-interval", str(int(window_s * 1000)),
                   "--stability-percentage", "10", "--max-trials", "10", "--input-data", str(inputs),
                   "--profile-export-file", str(export)]
        started = time.monotonic()
        try:
            proc = subprocess.run(command, capture_output=True, text=True, timeout=PERF_ANALYZER_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            return {"tool": "perf_analyzer", "error": f"did not finish within {PERF_ANALYZER_TIMEOUT_S} s"}
        elapsed = time.monotonic() - started
        if proc.returncode != 0 or not export.exists():
            tail = (proc.stdout + proc.stderr).strip().splitlines()[-3:]
            return {"tool": "perf_analyzer", "error": " | ".join(tail) or f"exit {proc.returncode}"}
        data = json.loads(export.read_text())
    experiment = data["experiments"][-1]
    bounds = experiment.get("window_boundaries") or []
    requests = experiment["requests"]
    if len(bounds) >= 4:  # the last three windows, as perf_analyzer reports them
        lo, hi = bounds[-4], bounds[-1]
        requests = [r for r in requests if lo <= r["timestamp"] <= hi]
    return {"tool": "perf_analyzer", **_from_timestamps(requests), "stable": "unstable" not in proc.stdout.lower(),
            "wall_s": elapsed}


def _from_timestamps(requests: list[dict]) -> dict:
    """genai-perf's definitions over perf_analyzer's per-request timestamps (ns). An empty final
    response is one of the response timestamps; it counts as a response, not as a token."""
    ttft, latency, responses = [], [], 0
    first_send, last_response = None, None
    for r in requests:
        times = r.get("response_timestamps") or []
        if not times:
            continue
        send = r["timestamp"]
        ttft.append((times[0] - send) / 1e6)
        latency.append((times[-1] - send) / 1e6)
        responses += len(times)
        first_send = send if first_send is None else min(first_send, send)
        last_response = times[-1] if last_response is None else max(last_response, times[-1])
    span = (last_response - first_send) / 1e9 if first_send is not None and last_response else 0.0
    return {"responses_per_s": responses / span if span else 0.0, "requests_per_s": len(latency) / span if span else 0.0,
            "ttft_p50_ms": _percentile(ttft, 50), "ttft_p99_ms": _percentile(ttft, 99),
            "latency_p50_ms": _percentile(latency, 50), "requests": len(latency)}


def run_engine(grpc_url: str, plan: StreamingPlan, concurrency: int, window_s: float, max_tokens: int) -> dict:
    started = time.monotonic()
    result = StreamingLoad(grpc_url, plan, concurrency=concurrency, duration_s=3 * window_s, warmup_s=window_s / 2,
                           max_tokens=max_tokens, seed=int(time.time())).run()
    stats = result.stats
    return {"tool": "engine", "responses_per_s": stats.responses_per_s, "requests_per_s": stats.requests_per_s,
            "ttft_p50_ms": stats.ttft_ms["p50"], "ttft_p99_ms": stats.ttft_ms["p99"],
            "latency_p50_ms": stats.latency_ms["p50"], "requests": stats.completed,
            "errors": sum(stats.errors.values()) + len(stats.stuck), "stable": True, "wall_s": time.monotonic() - started}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="generate")
    parser.add_argument("--repository", type=Path, default=STREAMING_DEMO_REPOSITORY, help="served by an embedded server")
    parser.add_argument("--url", help="attach to this HTTP URL instead of starting an embedded server")
    parser.add_argument("--grpc-url", help="gRPC host:port when attaching (default: same host, 8001)")
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--max-tokens", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--window-s", type=float, default=2.0)
    parser.add_argument("--delays", help="FIRST_MS,TOKEN_MS: serve a copy of the demo model with these delays")
    parser.add_argument("--perf-analyzer", type=Path, default=DEFAULT_PERF_ANALYZER)
    parser.add_argument("--docs", type=Path, nargs="?", const=DEFAULT_DOCS,
                        help=f"write the table of medians into this Markdown file's `{DOCS_SECTION}` section "
                             f"(default {DEFAULT_DOCS.relative_to(ROOT)})")
    args = parser.parse_args(argv)
    if not args.perf_analyzer.exists():
        print(f"perf_analyzer not found at {args.perf_analyzer}: run ../shared/tools/get-perf-analyzer.sh .perf_analyzer",
              file=sys.stderr)
        return 2
    launcher = None
    if args.url:
        http_url = args.url
        grpc_url = args.grpc_url or f"{http_url.split('://')[-1].rsplit(':', 1)[0]}:8001"
    else:
        from pytest_triton_ready.launchers.embedded import EmbeddedLauncher

        launcher = EmbeddedLauncher(_benchmark_copy(args.repository, args.delays))
        endpoints = launcher.start()
        http_url, grpc_url = endpoints.http_url, endpoints.grpc_url
    try:
        client = TritonClient(http_url, grpc_url)
        plan = StreamingPlan.from_metadata(args.model, client.model_metadata(args.model), client.model_config(args.model))
        client.close()
        load_before = os.getloadavg()
        rows = []
        with tempfile.TemporaryDirectory() as tmp:
            inputs = input_file(plan, args.max_tokens, 256, Path(tmp))
            for round_no in range(1, args.rounds + 1):
                for tool in (("pa", "engine") if round_no % 2 else ("engine", "pa")):
                    if tool == "pa":
                        row = run_perf_analyzer(args.perf_analyzer, args.model, grpc_url, args.concurrency,
                                                args.window_s, inputs)
                    else:
                        row = run_engine(grpc_url, plan, args.concurrency, args.window_s, args.max_tokens)
                    row["round"] = round_no
                    rows.append(row)
                    print(_line(row), flush=True)
        load_after = os.getloadavg()
    finally:
        if launcher is not None:
            launcher.cleanup()
    return _summary(rows, args, load_before, load_after)


def _benchmark_copy(source: Path, delays: str | None) -> Path:
    """A copy of the repository perf_analyzer can drive: the demo's iterative sequence batching
    left out (perf_analyzer 2.41's --streaming sends no sequence flags the iterative mode ends a
    stream on, and waits forever), so `generate` runs in its thread mode; with `delays`
    ("FIRST_MS,TOKEN_MS") its first-token and per-token delays set. Configs are rewritten through
    Triton's ModelConfig protobuf (lint/modelconfig.py)."""
    import shutil

    from google.protobuf import text_format

    from pytest_triton_ready.lint.modelconfig import parse_config_text

    target = Path(tempfile.mkdtemp(prefix="streaming-bench-")) / "models"
    shutil.copytree(source, target)
    for path in target.glob("*/config.pbtxt"):
        config = parse_config_text(path.read_text(), str(path))
        config.ClearField("sequence_batching")
        if delays:
            for key, value in zip(("first_token_delay_ms", "token_delay_ms"), delays.split(","), strict=True):
                if key in config.parameters:
                    config.parameters[key].string_value = value
        path.write_text(text_format.MessageToString(config))
    return target


def _line(row: dict) -> str:
    if "error" in row:
        return f"round {row['round']} {row['tool']:<13} ERROR {row['error']}"
    return (f"round {row['round']} {row['tool']:<13} {row['responses_per_s']:9.1f} responses/s "
            f"{row['requests_per_s']:7.1f} req/s  TTFT p50 {row['ttft_p50_ms']:7.2f} ms  p99 {row['ttft_p99_ms']:7.2f} ms  "
            f"latency p50 {row['latency_p50_ms']:8.2f} ms  ({row['requests']} requests, {row['wall_s']:.1f} s)")


def _summary(rows: list[dict], args, load_before, load_after) -> int:
    med = medians(rows, KEYS)
    if med is None:
        return 1
    runs = {tool: sum(1 for r in rows if r["tool"] == tool and "error" not in r) for tool in med}
    print()
    print(f"model {args.model}{' (delays ' + args.delays + ' ms)' if args.delays else ''}, gRPC streaming, "
          f"concurrency {args.concurrency}, {args.max_tokens} tokens per request, "
          f"{runs['perf_analyzer']} + {runs['engine']} runs; load average {load_before[0]:.1f} -> {load_after[0]:.1f} "
          f"on {os.cpu_count()} CPUs")
    print_table(med, {key: key for key in KEYS}, digits=2)
    ratio = med["engine"]["responses_per_s"] / med["perf_analyzer"]["responses_per_s"]
    print(f"responses/s ratio engine/perf_analyzer: {ratio:.3f}")
    if args.docs:
        section = DOCS_SECTION + (f"-delays-{args.delays.replace(',', '-')}" if args.delays else "")
        write_section(args.docs, section, docs_text(med, runs, args, load_before, load_after))
        print(f"written into {args.docs} (section {section})")
    return 0


def docs_text(med: dict, runs: dict, args, load_before, load_after) -> str:
    """The medians as a Markdown section: the command, the machine, the load average, one row per figure."""
    command = (f"python benchmarks/vs_perf_analyzer_streaming.py --concurrency {args.concurrency} --max-tokens "
               f"{args.max_tokens} --rounds {args.rounds} --window-s {args.window_s:g}"
               f"{' --delays ' + args.delays if args.delays else ''} --docs")
    lines = [f"## Latest: streaming against perf_analyzer --streaming ({time.strftime('%Y-%m-%d')})", "",
             f"Written by `{command}` on {machine_line()}; model {args.model}"
             f"{' (delays ' + args.delays + ' ms)' if args.delays else ''}, gRPC ModelStreamInfer, "
             f"{args.concurrency} streams with one request in flight each, {args.max_tokens} tokens per request, "
             f"{runs['perf_analyzer']} + {runs['engine']} runs alternated; load average {load_before[0]:.1f} -> "
             f"{load_after[0]:.1f}. Medians; the ratio is engine / perf_analyzer.", "",
             "| median of runs | perf_analyzer | engine | engine / pa |", "| --- | ---: | ---: | ---: |"]
    for key in KEYS:
        pa, en = med["perf_analyzer"][key], med["engine"][key]
        lines.append(f"| {LABELS[key]} | {pa:,.2f} | {en:,.2f} | {en / pa if pa else float('nan'):.2f} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
