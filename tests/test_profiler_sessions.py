"""JAX's profiler names (start_trace/stop_trace/trace, TraceAnnotation, StepTraceAnnotation,
annotate_function) write funcgrad's Chrome/Perfetto trace in JAX's folder layout."""

import glob
import gzip
import json
import os

import pytest

import funcgrad as fg
import funcgrad.numpy as fnp
from funcgrad import profiler


def _events(log_dir, name):
    (path,) = glob.glob(os.path.join(log_dir, "plugins", "profile", "*", name))
    with gzip.open(path, "rt") as f:
        return json.load(f)


def test_a_session_records_annotations_jitted_runs_and_their_kernels(tmp_path):
    step = fg.jit(lambda x: fnp.tanh(x @ x).sum())
    x = fnp.ones((16, 16))
    step(x)  # compiled before the session: its runs are still recorded
    with profiler.trace(str(tmp_path), create_perfetto_trace=True):
        for i in range(2):
            with profiler.StepTraceAnnotation("train", step_num=i):
                step(x)
        with profiler.TraceAnnotation("eval", split="test"):
            profiler.annotate_function(lambda: step(x), name="evaluate")()
    trace = _events(str(tmp_path), "perfetto_trace.json.gz")
    assert "metadata" in _events(str(tmp_path), "*.trace.json.gz")
    events = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    steps = [e for e in events if e["cat"] == "step"]
    assert [e["args"] for e in steps] == [{"step_num": 0}, {"step_num": 1}]
    runs = [e for e in events if e["cat"] == "jit"]
    assert [e["name"] for e in runs] == ["jit(<lambda>)"] * 3
    kernels = [e for e in events if e["cat"] in ("kernel", "call")]
    assert {e["name"] for e in kernels} >= {"dot_general"} and len(kernels) >= 6
    for s in steps:  # each step holds its jitted run, which holds its kernels
        inside = [e for e in runs if s["ts"] <= e["ts"] and
                  e["ts"] + e["dur"] <= s["ts"] + s["dur"] + 1e-3]
        assert len(inside) == 1
    names = [e["name"] for e in events if e["cat"] == "annotation"]
    assert names == ["eval", "evaluate"]  # by start time: the outer range first
    assert next(e for e in events if e["name"] == "eval")["args"] == {"split": "test"}


def test_sessions_are_exclusive_and_annotations_cost_nothing_outside(tmp_path):
    with pytest.raises(RuntimeError, match="No profile started"):
        profiler.stop_trace()
    profiler.start_trace(str(tmp_path))
    try:
        with pytest.raises(RuntimeError, match="already been started"):
            profiler.start_trace(str(tmp_path))
    finally:
        profiler.stop_trace()
    assert glob.glob(os.path.join(str(tmp_path), "plugins", "profile", "*", "*.trace.json.gz"))
    assert not glob.glob(os.path.join(str(tmp_path), "**", "perfetto_trace.json.gz"),
                         recursive=True)
    with profiler.TraceAnnotation("outside"):  # no session: nothing recorded, no error
        fg.jit(fnp.sin)(1.0)
    profiler.start_trace(str(tmp_path), profiler_options=profiler.ProfileOptions())
    profiler.stop_trace()  # a second run gets its own folder
    assert len(glob.glob(os.path.join(str(tmp_path), "plugins", "profile", "*"))) == 2
