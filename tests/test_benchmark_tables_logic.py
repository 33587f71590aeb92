"""What benchmarks/vs_perf_analyzer.py and vs_perf_analyzer_streaming.py compute and write (no
server): the engine's CPU per request, the load both tools are asked for, the targets a case
misses, and the section of docs/benchmarks.md they replace."""

import importlib.util
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"


def load_script(monkeypatch, name: str):
    """benchmarks/NAME.py as a module (it imports its neighbour side_by_side; its dataclasses look
    themselves up in sys.modules)."""
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, name, module)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def benchmark(monkeypatch):
    return load_script(monkeypatch, "vs_perf_analyzer")


def test_the_benchmark_divides_the_engines_cpu_by_every_request_answered_warmup_included(benchmark):
    from types import SimpleNamespace

    windows = [SimpleNamespace(stats=SimpleNamespace(attempted=100)) for _ in range(3)]
    assert benchmark.engine_requests(SimpleNamespace(traffic=SimpleNamespace(completed=360), windows=windows)) == 360
    assert benchmark.engine_requests(SimpleNamespace(traffic=None, windows=windows)) == 300


def rows(pa: dict, engine: dict, rounds: int = 2) -> list[dict]:
    return [{"tool": tool, **values, "round": n} for n in range(rounds)
            for tool, values in (("perf_analyzer", pa), ("engine", engine))]


def test_both_tools_are_asked_the_same_load(benchmark):
    closed, paced = benchmark.Load("concurrency", 16), benchmark.Load("rate", 3500)
    assert closed.perf_analyzer_args() == ["--concurrency-range", "16"] and closed.engine_args() == {"concurrency": 16}
    assert paced.perf_analyzer_args() == ["--request-rate-range", "3500", "--request-distribution", "constant"]
    assert paced.engine_args() == {"rate": 3500.0, "poisson": False}
    assert (str(closed), str(paced)) == ("c16", "3500/s")


def test_a_case_names_each_target_it_misses_with_its_ratio(benchmark):
    pa = {"throughput": 4000.0, "p50_ms": 2.0, "p99_ms": 10.0, "cpu_us": 100.0}
    case = benchmark.Case("grpc", benchmark.Load("concurrency", 16),
                          rows(pa, {"throughput": 3900.0, "p50_ms": 2.1, "p99_ms": 12.0, "cpu_us": 90.0}),
                          (0.5, 0, 0), (1.5, 0, 0))
    assert case.misses() == ["throughput 0.975 (target >= 1)", "p99 1.200 (target <= 1.1)"]
    table = benchmark.markdown_table([case])
    assert "| gRPC c16 | 4,000 | 3,900 | 0.97 |" in table and "| 0.5 -> 1.5 |" in table
    assert table.endswith("throughput 0.975 (target >= 1); p99 1.200 (target <= 1.1) |")


def test_a_tool_without_results_leaves_the_case_without_medians(benchmark):
    case = benchmark.Case("http", benchmark.Load("concurrency", 64),
                          [{"tool": "perf_analyzer", "error": "exit 1", "round": 1}], (0, 0, 0), (0, 0, 0))
    assert case.medians is None


def test_the_docs_section_is_replaced_between_its_markers_and_placed_once(tmp_path):
    sys.path.insert(0, str(BENCHMARKS))
    try:
        from side_by_side import write_section
    finally:
        sys.path.remove(str(BENCHMARKS))
    doc = tmp_path / "benchmarks.md"
    doc.write_text("# Benchmarks\n\nintro\n\n## Measured: older\n\nold table\n")
    write_section(doc, "vs_perf_analyzer", "## Latest\n\nfirst table\n")
    first = doc.read_text()
    assert first.index("first table") < first.index("## Measured: older")
    write_section(doc, "vs_perf_analyzer", "## Latest\n\nsecond table\n")
    second = doc.read_text()
    assert "second table" in second and "first table" not in second
    assert second.count("<!-- vs_perf_analyzer: begin -->") == 1 and "old table" in second


def test_the_streaming_benchmark_writes_its_medians_with_the_command_and_load_average(monkeypatch):
    from types import SimpleNamespace

    module = load_script(monkeypatch, "vs_perf_analyzer_streaming")
    figures = dict.fromkeys(module.KEYS, 10.0)
    med = {"perf_analyzer": figures, "engine": {**figures, "responses_per_s": 12.0}}
    args = SimpleNamespace(concurrency=8, max_tokens=32, rounds=4, window_s=2.0, delays=None, model="generate")
    text = module.docs_text(med, {"perf_analyzer": 4, "engine": 4}, args, (0.4, 0, 0), (1.2, 0, 0))
    assert "--concurrency 8 --max-tokens 32 --rounds 4 --window-s 2 --docs" in text
    assert "load average 0.4 -> 1.2" in text and "4 + 4 runs" in text
    assert "| responses/s | 10.00 | 12.00 | 1.20 |" in text
