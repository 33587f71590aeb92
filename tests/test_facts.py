"""Typed facts between checks (facts.py): publish and ask by type, a missing fact ends the asking
check INCOMPLETE naming the check that produces it, the report keeps its `facts` shape, and checks
name each other only through the declared registries (facts' producers, streaming counterparts)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from pytest_triton_ready.counterparts import STREAMING_COUNTERPARTS, streaming_counterpart
from pytest_triton_ready.errors import TritonReadyError
from pytest_triton_ready.facts import (
    FACT_TYPES,
    Capacity,
    CapacityPlan,
    CheckRef,
    DeadInstances,
    Drain,
    FactMissing,
    Facts,
    HotReload,
    MetricLayers,
    ServerStart,
    SoakMemory,
    StreamingCapacity,
    TargetLoad,
    VersionRollout,
)
from pytest_triton_ready.plugin import results as plugin_results
from pytest_triton_ready.plugin import state as plugin_state
from pytest_triton_ready.record.model import Result, Verdict
from pytest_triton_ready.record.recorder import CheckRecorder

ROOT = Path(__file__).resolve().parent.parent
CHECKS = ROOT / "checks"
PACKAGE = ROOT / "pytest_triton_ready"

SCALE = Capacity("scale", max_throughput_within_slo_infer_s=400.0, p99_ms=41.5, concurrency=8, instances=2,
                 slo_p99_ms=50.0)


def test_a_published_fact_is_asked_for_by_type_and_model():
    facts = Facts()
    assert not facts and facts.get(Capacity, "scale") is None
    facts.publish(SCALE)
    facts.publish(HotReload(passed=True, failed_requests=0, recovery_s=1.8, model="scale"))
    assert facts.require(Capacity, model="scale") is SCALE
    assert facts.require(HotReload).recovery_s == 1.8  # one per run: not keyed by its model
    assert facts.of(Capacity) == {"scale": SCALE} and facts.get(Capacity, "other") is None
    assert facts.get(VersionRollout) is None  # another kind of experiment, not published
    newer = Capacity("scale", max_throughput_within_slo_infer_s=380.0, p99_ms=40.0, concurrency=8, instances=2)
    facts.publish(newer)  # a rerun of the producer replaces the fact
    assert facts.require(Capacity, model="scale") is newer
    facts.withdraw(Capacity, "scale")
    assert facts.of(Capacity) == {} and facts.get(HotReload) is not None


def test_a_fact_is_frozen():
    with pytest.raises(AttributeError):
        SCALE.concurrency = 4  # type: ignore[misc]


def test_a_missing_fact_names_the_check_that_produces_it():
    with pytest.raises(FactMissing) as missing:
        Facts().require(Capacity, model="scale")
    assert isinstance(missing.value, TritonReadyError)
    assert missing.value.producer == CheckRef("PERF-2", "test_throughput_latency_curve")
    assert str(missing.value) == ("the measured throughput within SLO for scale is missing (perf.capacity): "
                                  "test_throughput_latency_curve (PERF-2) was not part of this run or published none")
    with pytest.raises(FactMissing, match=r"test_forced_reload_under_traffic_loses_no_request \(PERF-4\)"):
        Facts().require(HotReload)


def _drive(recorder: CheckRecorder, raised: BaseException):
    """Run plugin_results.pytest_pyfunc_call around a check body that raised `raised`."""
    item = type("Item", (), {})()
    item.stash = {plugin_state.RECORDER_KEY: recorder}
    call = plugin_results.pytest_pyfunc_call(item)
    next(call)
    return call.throw(raised)


def test_a_check_asking_for_a_missing_fact_ends_incomplete_naming_the_producer():
    recorder = CheckRecorder(Result("OPS-2", "operations", "test_capacity_plan_carries_declared_peak", "n"))
    with pytest.raises(pytest.skip.Exception, match=r"incomplete: .*test_throughput_latency_curve \(PERF-2\)"):
        _drive(recorder, FactMissing(Capacity, "scale"))
    assert recorder.result.verdict == Verdict.INCOMPLETE
    assert "test_throughput_latency_curve (PERF-2) was not part of this run" in recorder.result.reason


def test_a_check_that_already_failed_stays_failed_when_a_fact_is_missing():
    recorder = CheckRecorder(Result("OPS-2", "operations", "test_capacity_plan_carries_declared_peak", "n"))
    recorder.finding("scale: no peak rate")
    with pytest.raises(pytest.fail.Exception):
        _drive(recorder, FactMissing(Capacity, "scale"))


def test_the_report_keeps_the_facts_shape_and_reads_it_back():
    facts = Facts()
    facts.publish(SCALE)
    facts.publish(TargetLoad("scale", concurrency=8))
    facts.publish(TargetLoad("cached_sum", rate=120.0))
    facts.publish(StreamingCapacity("generate", max_output_tokens_per_s_within_slo=1148.6,
                                    max_requests_per_s_within_slo=36.0, instances=1, output_tokens_per_request=32.0,
                                    concurrency=8, ttft_p99_ms=31.4, lower_bound=True))
    facts.publish(HotReload(passed=False, failed_requests=37, recovery_s=4.2, model="scale"))
    facts.publish(CapacityPlan("shared", 3, 4, False, {"scale": {"gpus_needed": 4}}))
    facts.publish(MetricLayers(({"layer": "cost", "name": "GPU utilization", "value": None, "unit": "ratio",
                                 "model": None, "note": "no GPU"},)))
    facts.publish(DeadInstances("scale", ({"instance": "scale_0_0", "check": "PERF-1", "recovered": True},)))
    facts.publish(ServerStart(4.46))
    facts.publish(Drain(3.77, 171, 30.0))
    facts.publish(SoakMemory(211263488.0, 73.8, 90.3, 7.0, False))
    document = facts.to_json()
    assert document["faults.server_start"] == {"ready_s": 4.46}
    assert document["faults.drain"] == {"exit_s": 3.77, "refused_requests": 171, "exit_timeout_s": 30.0}
    assert document["soak.memory"]["leak_judged"] is False
    assert document["perf.capacity"] == {"scale": {"max_throughput_within_slo_infer_s": 400.0, "p99_ms": 41.5,
                                                   "concurrency": 8, "instances": 2, "slo_p99_ms": 50.0,
                                                   "lower_bound": False, "throughput_low_infer_s": None,
                                                   "level": None, "server_cpu_cores": None}}
    assert document["perf.target"] == {"scale": {"concurrency": 8}, "cached_sum": {"rate": 120.0}}
    assert document["faults.hot_reload"] == {"passed": False, "failed_requests": 37, "recovery_s": 4.2,
                                             "model": "scale", "incomplete": None}
    assert document["ops.capacity_plan"]["gpus_needed"] == 4
    assert document["monitoring.layers"][0]["name"] == "GPU utilization"
    assert document["health.dead_instances"] == {"scale": [{"instance": "scale_0_0", "check": "PERF-1",
                                                            "recovered": True}]}
    again = Facts()
    again.publish_json(document)
    assert again.to_json() == document
    assert again.require(StreamingCapacity, model="generate").lower_bound
    with pytest.raises(KeyError, match="unknown fact 'perf.capacityy'"):
        again.publish_json({"perf.capacityy": {}})


def _checks_by_name() -> dict[str, str]:
    """Every check function in checks/ -> its check id (the triton_check marker's first argument)."""
    found = {}
    for path in CHECKS.glob("test_*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef):
                for decorator in node.decorator_list:
                    if (isinstance(decorator, ast.Call) and getattr(decorator.func, "attr", "") == "triton_check"
                            and decorator.args):
                        found[node.name] = decorator.args[0].value
    return found


def test_the_registries_name_checks_that_exist_with_their_ids():
    checks = _checks_by_name()
    refs = [kind.producer for kind in FACT_TYPES if kind is not DeadInstances]  # that one: every load check
    refs += [c.check for c in STREAMING_COUNTERPARTS.values()]
    for ref in refs:
        assert checks.get(ref.name) == ref.check_id, f"{ref} is not a check in checks/"
    for unary in STREAMING_COUNTERPARTS:
        assert unary in checks, f"{unary} (a key of STREAMING_COUNTERPARTS) is not a check in checks/"
    assert streaming_counterpart("checks/test_soak.py::test_soak_stability[1]").check.check_id == "PERF-3"
    deferring = {node.name for path in CHECKS.glob("test_*.py") for node in ast.walk(ast.parse(path.read_text()))
                 if isinstance(node, ast.FunctionDef) and any(
                     isinstance(call, ast.Call) and getattr(call.func, "id", "") == "defer_to_streaming"
                     for call in ast.walk(node))}
    assert deferring and deferring <= set(STREAMING_COUNTERPARTS), deferring - set(STREAMING_COUNTERPARTS)


def _strings(path: Path) -> list[tuple[int, str]]:
    """The string constants of a module, docstrings left out."""
    tree = ast.parse(path.read_text())
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.FunctionDef, ast.ClassDef)) and node.body
                  and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}
    return [(node.lineno, node.value) for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings]


def test_checks_never_name_each_other_by_function_name():
    names = set(_checks_by_name())
    named = [f"{path.name}:{line}: {text[:60]!r}" for path in CHECKS.glob("*.py") for line, text in _strings(path)
             if any(re.search(rf"\b{name}\b", text) for name in names)]
    assert named == [], "a check names another by string; declare it in facts.py or counterparts.py"


def test_no_string_keyed_fact_is_left():
    pattern = re.compile(r"""(?<![\w.])(triton_facts|facts)\s*(\[|\.setdefault\(|\.get\(\s*["'])""")
    sources = [*CHECKS.glob("*.py"), *PACKAGE.rglob("*.py")]
    left = [f"{path.relative_to(ROOT)}:{n}: {line.strip()}" for path in sources
            for n, line in enumerate(path.read_text().splitlines(), 1) if pattern.search(line)]
    assert left == []


def _ops1(tmp_path, facts: Facts) -> CheckRecorder:
    """Run the real OPS-1 check (checks/test_operations.py) through the plugin's call hook, with an
    attested runbook and `facts`; returns its record."""
    import datetime as dt
    import importlib.util

    from pytest_triton_ready.settings import build_settings

    (tmp_path / "hot-update.md").write_text("# Hot update\n")
    today = dt.datetime.now(dt.timezone.utc).date().isoformat()
    config = tmp_path / "triton-ready.yaml"
    config.write_text("operations:\n  attestations:\n    hot_update_runbook: "
                      f"{{link: hot-update.md, owner: ml-platform, date: {today}}}\n")
    settings = build_settings({}, {}, environ={}, config_file=str(config))
    spec = importlib.util.spec_from_file_location("operations_checks", CHECKS / "test_operations.py")
    checks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(checks)
    recorder = CheckRecorder(Result("OPS-1", "operations", "t", "test_operations.py::"
                                    "test_hot_update_procedure_documented_and_exercised"), settings)
    item = type("Item", (), {})()
    item.stash = {plugin_state.RECORDER_KEY: recorder}
    call = plugin_results.pytest_pyfunc_call(item)
    next(call)
    try:
        try:
            checks.test_hot_update_procedure_documented_and_exercised(settings, facts, recorder)
        except FactMissing as missing:
            call.throw(missing)
        else:
            with pytest.raises(StopIteration):
                call.send(None)
    except pytest.skip.Exception:
        pass  # the check ended early: its record says how
    return recorder


def test_ops1_without_the_hot_reload_fact_is_incomplete_naming_perf4(tmp_path):
    recorder = _ops1(tmp_path, Facts())
    assert recorder.result.verdict == Verdict.INCOMPLETE
    assert "test_forced_reload_under_traffic_loses_no_request (PERF-4) was not part of this run" in recorder.result.reason
    assert recorder.result.reason.endswith("the runbook is attested but the procedure was not exercised")

    facts = Facts()
    facts.publish(HotReload(passed=True, failed_requests=0, recovery_s=1.8, model="scale"))
    recorder = _ops1(tmp_path, facts)
    assert recorder.result.verdict != Verdict.INCOMPLETE and not recorder.failed
    assert any(m.name == "time until the reloaded model served" and m.value == 1.8
               for m in recorder.result.measurements)
