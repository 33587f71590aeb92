"""The checklist's time per check on the demo, and what each added model costs, side by side.

    python benchmarks/checklist_time.py                          # the default checklist on the demo
    python benchmarks/checklist_time.py --before OLD/readiness.json   # ... next to an earlier run
    python benchmarks/checklist_time.py --models 3,12 --config tests/data/quick-checklist.yaml
    python benchmarks/checklist_time.py --runs 5 --keep runs/      # 5 consecutive runs: decided or not
    python benchmarks/checklist_time.py --runs 5 --repository tests/repositories/broken_model

Each run is `python -m pytest_triton_ready.cli --triton-launch=embedded` in a fresh report
directory; the time per check is the sum of its tests' durations in readiness.json. `--models
3,12` serves repositories of 3 and 12 copies of the demo's stateless models (cached_sum and
scale, alternated) and prints the cost of each added model per check: (t12 - t3) / 9, the soak
(PERF-3, a fixed duration) shown apart. `--runs N` runs the checklist N times in a row and prints,
per run, its wall time, the load average and the verdict and seconds of each decided-or-not check
(`DECIDING`), then how many runs decided each (PASS or FAIL, not INCOMPLETE), and for every check
(by test) the verdicts of all runs and in how many of them it gave its most common verdict.
`--before` reads a readiness.json of an earlier run (the same command on older code) for a
before/after table. The times are wall-clock seconds on this machine: on a shared or busy machine
they move with its load, which the output states.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from side_by_side import print_table  # noqa: E402

DEMO = ROOT / "pytest_triton_ready" / "demo" / "models"
STATELESS = ("cached_sum", "scale")
FIXED = ("PERF-3",)  # the soak runs for its configured duration whatever the models
DECIDING = ("PERF-1", "CFG-2", "PERF-2")  # the checks whose verdicts must not depend on a noisy machine


def copies_repository(dest: Path, count: int) -> list[str]:
    """`count` copies of the demo's stateless models (cached_sum_1, scale_2, ...), each a model of
    its own name."""
    names = []
    for index in range(count):
        source = STATELESS[index % len(STATELESS)]
        name = f"{source}_{index + 1}"
        shutil.copytree(DEMO / source, dest / name, ignore=shutil.ignore_patterns("__pycache__"))
        config = dest / name / "config.pbtxt"
        config.write_text(config.read_text().replace(f'name: "{source}"', f'name: "{name}"', 1))
        names.append(name)
    return names


def per_check(report: dict) -> dict[str, float]:
    """Seconds per check id: the sum of its tests' durations."""
    times: dict[str, float] = defaultdict(float)
    for result in report["results"]:
        times[result["check_id"]] += float(result.get("duration_s") or 0)
    return dict(times)


def run_checklist(repository: Path | None, config: Path | None, extra: list[str], keep: Path | None = None) -> dict:
    """One checklist run: its wall time, time per check and verdicts (its readiness.json copied to
    `keep` when given)."""
    with tempfile.TemporaryDirectory() as tmp:
        command = [sys.executable, "-m", "pytest_triton_ready.cli", "--triton-launch=embedded",
                   f"--readiness-report={tmp}/report", "-q", *extra]
        if repository is not None:
            command.append(f"--triton-model-repository={repository.resolve()}")
        if config is not None:
            command.append(f"--triton-config={config.resolve()}")
        started = time.monotonic()
        proc = subprocess.run(command, capture_output=True, text=True, cwd=tmp)
        wall = time.monotonic() - started
        path = Path(tmp) / "report" / "readiness.json"
        if not path.exists():
            tail = (proc.stdout + proc.stderr).strip().splitlines()[-5:]
            raise SystemExit(f"the checklist wrote no report (exit {proc.returncode}): " + " | ".join(tail))
        report = json.loads(path.read_text())
        if keep is not None:
            keep.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, keep)
    verdicts = {r["check_id"]: r["verdict"] for r in report["results"] if r["verdict"] != "not_applicable"}
    by_test = {f"{r['check_id']} {r['nodeid'].rsplit('::', 1)[-1]}": r["verdict"] for r in report["results"]}
    return {"wall_s": wall, "checks": per_check(report), "verdict": report["verdict"], "verdicts": verdicts,
            "by_test": by_test}


def consecutive_runs(count: int, config: Path | None, extra: list[str], keep: Path | None,
                     repository: Path | None = None) -> int:
    """`count` checklist runs in a row: per run its time, load and the DECIDING checks' verdicts;
    then how many runs decided each of them."""
    header = " | ".join(f"{i} verdict, s" for i in DECIDING)
    print(f"| run | pytest wall s | load average (start/end) | {header} | checklist verdict |")
    print("|" + " --- |" * (4 + len(DECIDING)))
    decided = dict.fromkeys(DECIDING, 0)
    every: list[dict[str, str]] = []
    for run in range(1, count + 1):
        load_before = os.getloadavg()[0]
        server_log = [f"--triton-server-log={(keep / f'run-{run}-server.log').resolve()}"] if keep else []
        result = run_checklist(repository, config, [*extra, *server_log], keep / f"run-{run}.json" if keep else None)
        every.append(result["by_test"])
        cells = []
        for check_id in DECIDING:
            verdict = result["verdicts"].get(check_id, "absent")
            decided[check_id] += verdict in ("pass", "fail")
            cells.append(f"{verdict} {result['checks'].get(check_id, 0):.1f}")
        print(f"| {run} | {result['wall_s']:.0f} | {load_before:.1f} / {os.getloadavg()[0]:.1f} | "
              f"{' | '.join(cells)} | {result['verdict']} |", flush=True)
    print("\n" + ", ".join(f"{i} decided in {n} of {count} runs" for i, n in decided.items())
          + f" ({os.cpu_count()} CPUs)")
    rows = agreement(every)
    print("\n| check | verdict per run | runs agreeing |\n| --- | --- | ---: |")
    for name, verdicts, agreed in rows:
        print(f"| {name} | {', '.join(verdicts)} | {agreed} of {count} |")
    same = sum(agreed == count for _, _, agreed in rows)
    print(f"\n{same} of {len(rows)} checks gave the same verdict in all {count} runs")
    return 0


def agreement(runs: list[dict[str, str]]) -> list[tuple[str, list[str], int]]:
    """Per check (by test): its verdict in each run ('absent' where a run lacks it) and in how
    many runs it gave its most common verdict."""
    names = sorted({name for run in runs for name in run})
    rows = []
    for name in names:
        verdicts = [run.get(name, "absent") for run in runs]
        rows.append((name, verdicts, max(verdicts.count(v) for v in set(verdicts))))
    return rows


def _busy() -> str:
    return f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, help="readiness.json of an earlier run, shown next to this one")
    parser.add_argument("--models", help="two model counts, e.g. 3,12: copies of the demo's stateless models")
    parser.add_argument("--config", type=Path, help="--triton-config for every run")
    parser.add_argument("--runs", type=int, help="run the checklist this many times in a row")
    parser.add_argument("--repository", type=Path, help="with --runs: this model repository instead of the demo")
    parser.add_argument("--keep", type=Path, help="with --runs: copy each run's readiness.json and server log here")
    parser.add_argument("extra", nargs="*", help="more checklist options (after --)")
    args = parser.parse_args(argv)
    if args.runs:
        return consecutive_runs(args.runs, args.config, args.extra, args.keep, args.repository)
    if args.models:
        low, high = (int(n) for n in args.models.split(","))
        runs = {}
        for count in (low, high):
            with tempfile.TemporaryDirectory() as tmp:
                copies_repository(Path(tmp), count)
                print(f"{count} models: running ({_busy()})", flush=True)
                runs[count] = run_checklist(Path(tmp), args.config, args.extra)
                print(f"{count} models: {runs[count]['wall_s']:.0f} s wall, verdict {runs[count]['verdict']} "
                      f"({_busy()})", flush=True)
        a, b = f"{low} models", f"{high} models"
        ids = sorted(set(runs[low]["checks"]) | set(runs[high]["checks"]))
        table = {a: dict(runs[low]["checks"]), b: dict(runs[high]["checks"])}
        table[a]["wall"], table[b]["wall"] = runs[low]["wall_s"], runs[high]["wall_s"]
        print()
        print_table(table, {**{i: i for i in ids}, "wall": "pytest wall time"}, digits=1, columns=(a, b),
                    first="seconds per check", ratio="ratio")
        outside = [i for i in ids if i not in FIXED]
        added = (sum(runs[high]["checks"].get(i, 0) for i in outside)
                 - sum(runs[low]["checks"].get(i, 0) for i in outside)) / (high - low)
        print(f"\neach added model costs {added:.1f} s of checks outside the soak ({', '.join(FIXED)})")
        return 0
    print(f"running the checklist ({_busy()})", flush=True)
    after = run_checklist(None, args.config, args.extra)
    print(f"{after['wall_s']:.0f} s wall, verdict {after['verdict']} ({_busy()})")
    if args.before is None:
        for check_id, seconds in sorted(after["checks"].items()):
            print(f"| {check_id:<8} | {seconds:>8.1f} |")
        return 0
    before = json.loads(args.before.read_text())
    table = {"before": per_check(before), "after": after["checks"]}
    ids = sorted(set(table["before"]) | set(table["after"]))
    print_table(table, {i: i for i in ids}, digits=1, columns=("before", "after"), first="seconds per check",
                ratio="after/before")
    old = {r["check_id"]: r["verdict"] for r in before["results"] if r["verdict"] != "not_applicable"}
    changed = {i: (old.get(i), after["verdicts"].get(i)) for i in ids if old.get(i) != after["verdicts"].get(i)}
    print("verdicts that changed: " + (", ".join(f"{i} {b} -> {a}" for i, (b, a) in changed.items()) or "none"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
