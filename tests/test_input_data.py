"""Declared input data (perf_analyzer's --input-data JSON), value ranges, optional inputs, BF16,
declared expectations and streamed outputs decoded by their datatype, without a server."""

from __future__ import annotations

import base64
import json
import re
import struct

import numpy as np
import pytest

from pytest_triton_ready.expectations import answer_mismatches, expectation_for, parse_expectation
from pytest_triton_ready.input_data import InputDataError, load_input_data, parse_input_data
from pytest_triton_ready.inputs import refusal_hint, synthesize_inputs

META = {"name": "m", "inputs": [{"name": "INPUT0", "datatype": "INT32", "shape": [-1, 4]},
                                {"name": "INPUT1", "datatype": "FP32", "shape": [-1, 2]}],
        "outputs": [{"name": "OUTPUT0", "datatype": "INT32", "shape": [-1, 4]}]}
BATCHED = {"max_batch_size": 8}


def test_perf_analyzer_flat_entries_are_used_round_robin_and_batched_from_consecutive_entries():
    data = parse_input_data({"data": [{"INPUT0": [1, 2, 3, 4], "INPUT1": [0.5, 1.5]},
                                      {"INPUT0": [5, 6, 7, 8], "INPUT1": [2.5, 3.5]}]}, "team.json")
    first = synthesize_inputs(META, BATCHED, data=data, entry=0)
    assert first["INPUT0"].tolist() == [[1, 2, 3, 4]] and first["INPUT0"].dtype == np.int32
    batch = synthesize_inputs(META, BATCHED, data=data, entry=1, batch_size=2)
    assert batch["INPUT0"].tolist() == [[5, 6, 7, 8], [1, 2, 3, 4]] and batch["INPUT1"].shape == (2, 2)


def test_b64_content_shape_and_bytes_length_prefixes_are_read_as_perf_analyzer_writes_them():
    raw = np.array([1.0, 2.0], dtype="<f4").tobytes()
    strings = b"".join(struct.pack("<I", len(s)) + s for s in (b"hello", b"ok"))
    meta = {"inputs": [{"name": "X", "datatype": "FP32", "shape": [-1, -1]},
                       {"name": "S", "datatype": "BYTES", "shape": [2]}]}
    data = parse_input_data({"data": [{"X": {"content": {"b64": base64.b64encode(raw).decode()}, "shape": [1, 2]},
                                       "S": {"b64": base64.b64encode(strings).decode()}}]}, "f.json")
    arrays = synthesize_inputs(meta, {"max_batch_size": 0}, data=data)
    assert arrays["X"].tolist() == [[1.0, 2.0]] and arrays["S"].tolist() == [b"hello", b"ok"]


def test_sequence_streams_keep_their_steps():
    data = parse_input_data({"data": [[{"INPUT": ["1"]}, {"INPUT": ["2"]}, {"INPUT": ["3"]}], [{"INPUT": ["1"]}]]}, "s.json")
    assert data.nested and [len(s) for s in data.streams] == [3, 1]
    assert data.where(3) == "s.json data[1][0]"


@pytest.mark.parametrize(("document", "message"), [
    ({"rows": []}, "expected an object with a \"data\" list"),
    ({"data": [{"A": {"b64": "%%%"}}]}, "data[0].A: \"b64\" is not valid base64"),
    ({"data": [{"A": [1]}, [{"A": [1]}]]}, "mixes entries and lists of entries"),
    ({"data": [{"A": {"content": [1], "shape": "2"}}]}, "\"shape\" must be a list"),
])
def test_a_malformed_file_is_one_line_naming_the_file_and_entry(document, message):
    with pytest.raises(InputDataError, match=re.escape(message)) as info:
        parse_input_data(document, "team.json")
    assert str(info.value).startswith("team.json") and "\n" not in str(info.value)


def test_data_that_does_not_fit_the_model_names_the_entry_and_the_input():
    data = parse_input_data({"data": [{"INPUT0": [1, 2, 3], "INPUT1": [1.0, 2.0]}]}, "team.json")
    with pytest.raises(InputDataError, match=r"team.json data\[0\].INPUT0: 3 values do not fill shape"):
        synthesize_inputs(META, BATCHED, data=data)
    unknown = parse_input_data({"data": [{"INPUT9": [1]}]}, "team.json")
    with pytest.raises(InputDataError, match="INPUT9 is not an input of m"):
        synthesize_inputs(META, BATCHED, data=unknown)
    many = {"inputs": [{"name": "V", "datatype": "INT32", "shape": [-1, -1, -1]}]}
    with pytest.raises(InputDataError, match="inputs.shapes"):
        synthesize_inputs(many, {}, data=parse_input_data({"data": [{"V": [1, 2, 3, 4]}]}, "v.json"))


def test_undeclared_inputs_are_synthesized_within_ranges_and_optional_ones_left_out():
    meta = {"inputs": [{"name": "WAIT_S", "datatype": "FP32", "shape": [1]},
                       {"name": "COUNT", "datatype": "INT64", "shape": [1]},
                       {"name": "MASK", "datatype": "BOOL", "shape": [1]},
                       {"name": "HALF", "datatype": "BF16", "shape": [3]}]}
    config = {"input": [{"name": "MASK", "optional": True}]}
    rng = np.random.default_rng(1)
    for _ in range(50):
        arrays = synthesize_inputs(meta, config, rng=rng, ranges={"WAIT_S": (0.0, 0.01), "COUNT": (2, 3)})
        assert 0.0 <= float(arrays["WAIT_S"][0]) <= 0.01 and int(arrays["COUNT"][0]) in (2, 3)
        assert "MASK" not in arrays
    from tritonclient.utils import np_to_triton_dtype

    assert np_to_triton_dtype(arrays["HALF"].dtype) == "BF16" and arrays["HALF"].nbytes == 6
    declared = synthesize_inputs(meta, config, data=parse_input_data({"data": [{"MASK": [True]}]}, "d.json"))
    assert declared["MASK"].tolist() == [True]


def test_a_refused_synthesized_request_names_what_was_made_up_and_where_to_declare_it():
    hint = refusal_hint("m", META, BATCHED, None, 16)
    assert "INPUT0, INPUT1 were synthesized" in hint and "sent as 16" not in hint  # only the batch dim is -1
    assert "variable dims sent as 16" in refusal_hint("m", META, {"max_batch_size": 0}, None, 16)
    assert "inputs.data" in hint and "inputs.shapes" in hint and "inputs.ranges" in hint
    data = parse_input_data({"data": [{"INPUT0": [1, 2, 3, 4]}]}, "team.json")
    assert "INPUT1 were synthesized" in refusal_hint("m", META, BATCHED, data, 16)


def test_settings_read_inputs_data_relative_to_the_yaml_and_from_the_command_line(tmp_path):
    from pytest_triton_ready.settings import SettingsError, build_settings

    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "m.json").write_text(json.dumps({"data": [{"INPUT0": [1, 2, 3, 4]}]}))
    (tmp_path / "other.json").write_text(json.dumps({"data": [{"X": [1]}]}))
    config = tmp_path / "triton-ready.yaml"
    config.write_text("inputs:\n  data:\n    m: data/m.json\n  ranges:\n    m:\n      INPUT1: [0, 1]\n"
                      "expectations:\n  m: deterministic\n")
    settings = build_settings({}, {}, environ={}, config_file=str(config),
                              cli_input_data=[f"other={tmp_path / 'other.json'}"])
    declared = settings.input_declarations()
    assert declared.data["m"].entries[0] == {"INPUT0": [1, 2, 3, 4]} and set(declared.data) == {"m", "other"}
    assert declared.ranges == {"m": {"INPUT1": (0.0, 1.0)}} and settings.expectations["m"].deterministic
    config.write_text("inputs:\n  data:\n    m: data/missing.json\n")
    with pytest.raises(SettingsError, match=r"triton-ready.yaml:3 \(inputs.data.m\): .*missing.json: cannot read"):
        build_settings({}, {}, environ={}, config_file=str(config))
    with pytest.raises(SettingsError, match="--triton-input-data from cli: expected MODEL=FILE"):
        build_settings({}, {}, environ={}, cli_input_data=["nofile"])


def test_expectations_compare_values_and_validation_data_adds_cases():
    expectation = parse_expectation([{"inputs": {"INPUT0": [1, 2, 3, 4]}, "outputs": {"OUTPUT0": [2, 4, 6, 8]}}], "e.m")
    [case] = expectation.cases
    good = {"OUTPUT0": np.array([[2, 4, 6, 8]], dtype=np.int32)}
    assert answer_mismatches(case, good, META["outputs"], True) == []
    [problem] = answer_mismatches(case, {"OUTPUT0": np.array([[2, 4, 6, 9]], dtype=np.int32)}, META["outputs"], True)
    assert problem.startswith("e.m[0]: output OUTPUT0 is [2, 4, 6, 9]")
    with pytest.raises(InputDataError, match="deterministic"):
        parse_expectation("sometimes", "expectations.m")
    data = parse_input_data({"data": [{"INPUT0": [1, 1, 1, 1]}], "validation_data": [{"OUTPUT0": [2, 2, 2, 2]}]}, "v.json")
    merged = expectation_for("m", {}, data)
    assert merged.deterministic and merged.cases[0].where == "v.json data[0] validation_data"


def test_streamed_numeric_outputs_are_decoded_by_their_datatype():
    """A streaming model with an INT32 token output used to fail with the tool's own
    'unpack_from requires a buffer of at least N bytes' (every output decoded as BYTES)."""
    from tritonclient.grpc import service_pb2

    from pytest_triton_ready.load.streaming.requests import decode_outputs, output_problems

    response = service_pb2.ModelInferResponse(id="r")
    response.outputs.add(name="TOKEN", datatype="INT32", shape=[1])
    response.raw_output_contents.append(np.array([7], dtype="<i4").tobytes())
    response.outputs.add(name="TEXT", datatype="BYTES", shape=[1])
    response.raw_output_contents.append(struct.pack("<I", 2) + b"hi")
    decoded = decode_outputs(response)
    assert decoded["TOKEN"].tolist() == [7] and decoded["TEXT"].tolist() == [b"hi"]
    declared = [{"name": "TOKEN", "datatype": "INT32", "shape": [1]}, {"name": "TEXT", "datatype": "FP32", "shape": [1]}]
    assert output_problems(response, declared) == ["output TEXT is BYTES, declared FP32"]
    batched = [{"name": "TOKEN", "datatype": "INT32", "shape": [-1, 1]}, {"name": "TEXT", "datatype": "BYTES", "shape": [-1, 2]}]
    assert output_problems(response, batched, batched=True) == ["output TEXT has shape [1], declared [-1, 2]"]


def test_llm_backend_inputs_get_valid_values():
    from pytest_triton_ready.load.streaming.requests import StreamingPlan

    vllm = {"inputs": [{"name": "text_input", "datatype": "BYTES", "shape": [1]},
                       {"name": "stream", "datatype": "BOOL", "shape": [1]},
                       {"name": "sampling_parameters", "datatype": "BYTES", "shape": [1]},
                       {"name": "exclude_input_in_output", "datatype": "BOOL", "shape": [1]}],
            "outputs": [{"name": "text_output", "datatype": "BYTES", "shape": [-1]}]}
    vllm["inputs"].append({"name": "return_logprobs", "datatype": "BOOL", "shape": [1]})
    config = {"input": [{"name": n, "optional": True} for n in ("stream", "sampling_parameters",
                                                                "exclude_input_in_output", "return_logprobs")]}
    arrays = StreamingPlan.from_metadata("v", vllm, config).arrays("hi", 8, np.random.default_rng(0))
    assert set(arrays) == {"text_input", "stream", "sampling_parameters", "exclude_input_in_output"}  # streaming needs them
    assert json.loads(arrays["sampling_parameters"][0]) == {"max_tokens": 8, "temperature": 0.0}
    assert arrays["exclude_input_in_output"].tolist() == [True] and arrays["stream"].tolist() == [True]


def test_a_unary_tensorrt_llm_model_gets_a_prompt_a_positive_budget_and_no_stream():
    from pytest_triton_ready.prompts import QUESTIONS

    meta = {"inputs": [{"name": "text_input", "datatype": "BYTES", "shape": [-1, 1]},
                       {"name": "max_tokens", "datatype": "INT32", "shape": [-1, 1]},
                       {"name": "stream", "datatype": "BOOL", "shape": [-1, 1]},
                       {"name": "end_id", "datatype": "INT32", "shape": [-1, 1]}]}
    config = {"max_batch_size": 4, "input": [{"name": "stream", "optional": True}, {"name": "end_id", "optional": True}]}
    arrays = synthesize_inputs(meta, config, rng=np.random.default_rng(0))
    assert set(arrays) == {"text_input", "max_tokens"}
    assert arrays["text_input"][0, 0].decode() in QUESTIONS and arrays["max_tokens"].tolist() == [[16]]


def test_a_data_file_on_disk_is_read(tmp_path):
    path = tmp_path / "d.json"
    path.write_text("{not json")
    with pytest.raises(InputDataError, match="not valid JSON"):
        load_input_data(path)
