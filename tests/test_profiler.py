"""The per-kernel profiler (funcgrad.profiler): rows that add up to the measured step, the
expected kernels and lines, calls counted inside loops, a valid Chrome trace, an unchanged
plain program, and the shared bookkeeping (nesting, CUDA-event clock) on fake recorders."""

import json

import numpy as np
import pytest

import funcgrad as fg
import funcgrad.numpy as fnp
from funcgrad import errors, lax, profiler

rng = np.random.default_rng(0)
N = 384
X = rng.standard_normal((N, N)).astype(np.float32)
W = rng.standard_normal((N, N)).astype(np.float32) / N


def heavy(x, w):
    y = x @ w
    z = fnp.exp(fnp.tanh(y) * 2.0) + fnp.sin(y)
    return fnp.log1p(z * z).sum(axis=0)


def lines_of(fn):
    import inspect
    src, first = inspect.getsourcelines(fn)
    return {i + first: text for i, text in enumerate(src)}


def line_no(fn, fragment):
    return next(n for n, text in lines_of(fn).items() if fragment in text)


def test_rows_sum_to_the_step_and_name_the_known_kernels():
    f = fg.jit(heavy, backend="numpy")
    prof = f.profile(X, W, repeat=7)
    names = [r.name for r in prof.rows]
    program = f.lower(X, W).compile()._exe.program
    assert sorted(names) == sorted(["dot_general"] + [k.spec.name for k in program.kernels])
    assert abs(prof.total_seconds - prof.step_seconds) <= 0.1 * prof.step_seconds
    assert abs(sum(r.share for r in prof.rows) - 1.0) <= 0.1
    assert len(prof.step_times) == 7 and 1 <= prof.kept <= 7
    assert prof.step_seconds <= profiler.SLOW_RUN * min(prof.step_times)
    dot = next(r for r in prof.rows if r.name == "dot_general")
    assert dot.source == f"test_profiler.py:{line_no(heavy, 'x @ w')} (heavy)"
    assert dot.kind == "call" and dot.calls == 1
    assert dot.flops == 2 * N * N * N and dot.gflops > 0
    assert dot.nbytes == 3 * N * N * 4
    kernels = [r for r in prof.rows if r.kind == "kernel"]
    assert kernels and all(r.source.startswith("test_profiler.py:") for r in kernels)
    assert all(r.gbps > 0 and r.gflops is None for r in kernels)
    assert any(f":{line_no(heavy, 'fnp.exp')} " in r.source for r in kernels)
    table = prof.table()
    for word in ["kernel / call", "source", "calls", "us/step", "share", "bytes", "GB/s",
                 "GFLOP/s", "dot_general", "step (measured)"]:
        assert word in table


def test_chrome_trace_is_valid_json_with_every_field(tmp_path):
    f = fg.jit(heavy, backend="numpy")
    path = tmp_path / "trace.json"
    prof = f.profile(X[:64, :64], W[:64, :64], repeat=3, trace=str(path))
    with open(path) as fh:
        trace = json.load(fh)
    meta = [ev for ev in trace["traceEvents"] if ev["ph"] == "M"]
    assert [ev["name"] for ev in meta] == ["process_name", "thread_name"]
    events = [ev for ev in trace["traceEvents"] if ev["ph"] != "M"]
    assert len(events) == 3 * (len(prof.rows) + 1)  # every site of every step, and the steps
    for ev in events:
        assert ev["ph"] == "X" and isinstance(ev["name"], str)
        assert isinstance(ev["ts"], float) and isinstance(ev["dur"], float)
        assert ev["ts"] >= 0 and ev["dur"] >= 0
        assert isinstance(ev["pid"], int) and isinstance(ev["tid"], int)
        assert isinstance(ev["args"], dict)
    steps = [ev for ev in events if ev["cat"] == "step"]
    assert [ev["name"] for ev in steps] == ["step 0", "step 1", "step 2"]
    for ev in events:  # every site lies inside its step
        step = steps[ev["args"]["run"]]
        assert step["ts"] <= ev["ts"] and ev["ts"] + ev["dur"] <= step["ts"] + step["dur"]


def test_a_kernel_in_a_loop_body_is_counted_per_call():
    def f(x):
        y = lax.fori_loop(0, 5, lambda i, c: fnp.tanh(c) * 0.5, x)
        return y * 2.0

    prof = fg.profile(fg.jit(f, backend="numpy"), np.ones((64, 64), np.float32), repeat=3)
    body = [r for r in prof.rows if r.kind == "kernel" and r.calls == 5]
    assert body and "fnp.tanh" in lines_of(f)[int(body[0].source.split(":")[1].split()[0])]
    loop = next(r for r in prof.rows if r.kind == "control")
    assert loop.name in ("scan", "while") and loop.calls == 1
    assert abs(prof.total_seconds - prof.step_seconds) <= 0.5 * prof.step_seconds
    assert loop.seconds < prof.step_seconds  # the loop's own time, its bodies' excluded


def test_not_profiling_costs_nothing_the_plain_program_is_unchanged():
    f = fg.jit(heavy, backend="numpy")
    compiled = f.lower(X[:8, :8], W[:8, :8]).compile()
    exe = compiled._exe
    fn, source = exe._fn, compiled.as_text()
    compiled.profile(X[:8, :8], W[:8, :8], repeat=2)
    assert exe._fn is fn and compiled.as_text() == source
    assert "_clock" not in source and "_rec" not in source
    np.testing.assert_allclose(np.asarray(f(X[:8, :8], W[:8, :8])),
                               np.asarray(fg.jit(heavy, backend="numpy")(X[:8, :8], W[:8, :8])))


def test_profiling_a_donating_function_leaves_the_argument_usable():
    f = fg.jit(lambda x: fnp.sin(x) + 1.0, backend="numpy", donate_argnums=0)
    x = fnp.ones((32, 32))
    prof = f.profile(x, repeat=3)
    assert prof.rows and np.all(np.asarray(x) == 1.0)


def test_profile_errors():
    f = fg.jit(heavy, backend="numpy")
    compiled = f.lower(X, W).compile()
    with pytest.raises(errors.FuncgradTypeError, match="built for other arguments"):
        compiled.profile(X[:8], W)
    with pytest.raises(errors.FuncgradValueError, match="repeat"):
        compiled.profile(X, W, repeat=0)
    with pytest.raises(errors.BackendUnavailableError, match="profiling hook"):
        profiler.profile_executable(object(), [], name="f")


# --- the shared bookkeeping, with fake clocks --------------------------------------------------

def site(name, kind="kernel"):
    return profiler.Site(name, kind, ["model.py:1 (f)"], 1000)


def test_self_times_subtract_the_sites_inside():
    loop, k = site("while", "control"), site("k0")
    events = [(k, 1.0, 2.0), (k, 3.0, 5.0), (loop, 0.5, 6.0), (site("k1"), 7.0, 8.0)]
    got = {(ev[0].name, ev[1]): ev[3] for ev in profiler._self_times(events)}
    assert got == {("k0", 1.0): 1.0, ("k0", 3.0): 2.0, ("while", 0.5): 2.5, ("k1", 7.0): 1.0}


def test_runs_slowed_by_other_load_are_left_out_of_the_medians():
    k0, k1 = site("k0"), site("k1")
    rec = profiler.Recorder()
    runs = []
    for k, (d0, d1) in enumerate([(1.0, 2.0), (1.1, 2.0), (9.0, 2.0), (1.0, 2.1)]):
        t = 100.0 * k
        rec.events += [(k0, t, t + d0), (k1, t + d0, t + d0 + d1)]
        runs.append((t, t + d0 + d1, 2 * k, 2 * k + 2))
    prof = profiler._result(rec, runs, "f")
    assert prof.kept == 3 and prof.repeat == 4 and prof.step_times[2] == pytest.approx(11.0)
    assert prof.step_seconds == pytest.approx(3.1)  # steps 3.0, 3.1, 3.1 (11.0 left out)
    assert [r.name for r in prof.rows] == ["k1", "k0"]
    assert [r.seconds for r in prof.rows] == pytest.approx([2.0, 1.0])
    assert "medians of 3 of 4 steps (1 slowed by other load left out)" in prof.table()
    assert len(prof.chrome_trace()["traceEvents"]) == 2 + 4 * 3  # the trace keeps every run


class FakeCuda:
    """A stand-in for `cupy.cuda`: events carry the time a fake device reached them."""

    now = 0.0

    class Event:
        def record(self):
            FakeCuda.now += 1e-3
            self.t = FakeCuda.now

        def synchronize(self):
            pass

    @staticmethod
    def get_elapsed_time(a, b):
        return (b.t - a.t) * 1e3  # milliseconds, as CuPy


class FakeExecutable:
    """An executable with the profiling hook: two kernels and a call per run."""

    sites = [site("k0"), site("k1"), site("dot_general", "call")]

    def instrumented(self, recorder):
        def run(*args):
            for s in self.sites:
                t0 = recorder.clock()
                recorder.record(s, t0)
            return []
        return run


def test_event_clock_bookkeeping_as_on_a_gpu():
    class Cupy:
        cuda = FakeCuda
    clock = profiler.EventClock(Cupy)
    prof = profiler.profile_executable(FakeExecutable(), [], repeat=4, clock=clock, name="f")
    assert [r.name for r in prof.rows] == ["k0", "k1", "dot_general"]
    for r in prof.rows:  # each site spans one event step: 1 ms
        assert r.calls == 1 and r.seconds == pytest.approx(1e-3)
    assert prof.step_seconds == pytest.approx(7e-3)  # 2 events per site and one after
    assert len(prof.chrome_trace()["traceEvents"]) == 2 + 4 * 4


def test_convolution_flops_from_shapes():
    x, w = np.ones((2, 3, 9, 9), np.float32), np.ones((4, 3, 3, 3), np.float32)
    f = fg.jit(lambda x, w: lax.conv_general_dilated(x, w, (1, 1), "VALID"), backend="numpy")
    prof = f.profile(x, w, repeat=1)
    conv = next(r for r in prof.rows if r.name == "conv_general_dilated")
    assert conv.flops == 2 * (2 * 4 * 7 * 7) * (3 * 3 * 3)


def test_cuda_programs_report_their_kernels_and_calls(monkeypatch):
    from funcgrad.backends.cuda import emulate, program
    if emulate.compiler() is None:  # the fake-clock tests above check the same bookkeeping
        pytest.skip("no host C++ compiler to emulate the CUDA kernels with")
    old = program.set_runtime(emulate.EmulatedRuntime())
    try:
        x, w = X[:32, :32], W[:32, :32]
        compiled = fg.jit(heavy, backend="cuda").lower(x, w).compile()
        assert compiled._exe.profile_clock() is None  # no CUDA events: the host clock
        prof = compiled.profile(x, w, repeat=2)
    finally:
        program.set_runtime(old)
    nodes = compiled._exe.program.nodes
    assert len(prof.rows) == len(nodes)
    assert {r.name for r in prof.rows} >= {"dot_general"} | {
        n.spec.name for n in nodes if hasattr(n, "spec")}
    assert all(r.calls == 1 and r.site.program.startswith("cuda_program_") for r in prof.rows)


def test_static_arguments_and_the_native_tier():
    def f(x, n):
        return fnp.tanh(x) * n

    x = np.ones((16, 16), np.float32)
    prof = fg.jit(f, static_argnums=1, backend="numpy").profile(x, 3)
    assert [r.kind for r in prof.rows] == ["kernel"] and prof.rows[0].calls == 1
    old = fg.config.native
    fg.config.update("native", "sync")  # the C tier when a compiler exists, else numpy
    try:
        jitted = fg.jit(f, static_argnums=1)
        prof = jitted.profile(x, 3, repeat=2)
        text = jitted.lower(x, 3).compile().as_dot()
    finally:
        fg.config.update("native", old)
    assert [r.kind for r in prof.rows] == ["kernel"] and prof.rows[0].calls == 1
    assert "subgraph cluster_k" in text
