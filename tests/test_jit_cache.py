"""The one jit cache (`compiler/jit_cache.py`): one key per call, one path for hits and
misses, the explicit program cache, donation bookkeeping linear in the arguments, and the
counters that `call.stats`, `pipeline.stats` and `cache_info()` read."""

import gc
import sys

import numpy as np
import pytest

import funcgrad as fg
import funcgrad.numpy as fnp
from funcgrad import debug, errors
from funcgrad.compiler import call, jit_cache, pipeline
from funcgrad.compiler.jit import Jitted


def close(a, b):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-6)


@pytest.fixture
def key_calls(monkeypatch):
    """Counts `Jitted._key` calls: the key computation of a call."""
    calls = []
    real = Jitted._key

    def spy(self, args, kwargs):
        calls.append(1)
        return real(self, args, kwargs)
    monkeypatch.setattr(Jitted, "_key", spy)
    return calls


# --- one key, one path --------------------------------------------------------------------------

@pytest.mark.parametrize("call_it", [
    lambda f: f(fnp.ones(3), fnp.ones(3)),
    lambda f: f(fnp.ones(3), y=fnp.ones(3)),  # keyword arguments
    lambda f: f(np.ones(3, np.float64), 2.0),  # leaves converted: NumPy float64, a Python float
])
def test_a_call_computes_its_key_once_hit_or_miss(key_calls, call_it):
    f = fg.jit(lambda x, y: {"s": x + y, "p": (x * y,)})
    first = call_it(f)
    assert len(key_calls) == 1 and f.trace_count == 1
    again = call_it(f)
    assert len(key_calls) == 2 and f.cache_info().hits == 1
    for a, b in zip(fg.tree_util.tree_leaves(first), fg.tree_util.tree_leaves(again)):
        assert type(a) is type(b) and type(a._value) is type(b._value) is np.ndarray
        assert a.weak_type == b.weak_type
        close(a, b)
    assert fg.tree_util.tree_structure(first) == fg.tree_util.tree_structure(again)


def test_traced_and_eager_calls_share_one_entry():
    f = fg.jit(lambda x: fnp.sin(x) * 2.0)
    x = fnp.linspace(0.0, 1.0, 4)
    fg.grad(lambda x: fnp.sum(f(x)))(x)  # traced under grad: the entry, no eager run yet
    assert f.cache_info().size == 1
    close(f(x), np.sin(np.asarray(x)) * 2.0)  # the same entry, now compiled and run eagerly
    assert f.trace_count == 1 and f.cache_info().hits == 1


def test_a_failing_donating_first_call_deletes_its_donated_argument():
    def boom(v):
        raise RuntimeError("the callback failed")

    def step(x):
        y = x * 2.0 + 1.0
        debug.callback(boom, y)
        return y
    jf = fg.jit(step, donate_argnums=0)
    x = fnp.full((4,), 0.5) + 0.0
    with pytest.raises(RuntimeError, match="the callback failed"):  # the user's own error
        jf(x)  # a miss: traced, compiled, run, failed
    assert jit_cache.is_deleted(x)


def test_an_array_donated_twice_is_refused_naming_both():
    jf = fg.jit(lambda a, b: (a + b, a - b), donate_argnums=(0, 1))
    x = fnp.ones(3) + 0.0
    with pytest.raises(errors.FuncgradValueError, match=r"argument `a` is donated.*`b`"):
        jf(x, x)
    assert not jit_cache.is_deleted(x)
    close(jf(x, fnp.ones(3) + 0.0)[0], [2.0] * 3)
    assert jit_cache.is_deleted(x)


# --- donation work is linear --------------------------------------------------------------------

def _python_lines_of(fn):
    """How many Python lines (of any module, generated code included) `fn()` executes: a
    measure of work that does not depend on the machine's speed."""
    count = [0]

    def tracer(frame, event, arg):
        if event == "line":
            count[0] += 1
        return tracer
    sys.settrace(tracer)
    try:
        fn()
    finally:
        sys.settrace(None)
    return count[0]


def _lines_per_leaf(n):
    step = fg.jit(lambda ps, lr: [p - lr * p for p in ps], donate_argnums=0)
    ps = step([fnp.ones(2) + 0.0 for _ in range(n)], fnp.float32(0.5))  # traced, compiled
    ps = step(ps, fnp.float32(0.5))
    box = [ps]

    def one_step():
        box[0] = step(box[0], fnp.float32(0.5))
    lines = _python_lines_of(one_step)
    assert all(jit_cache.is_deleted(p) for p in ps)
    close(box[0][0], [0.125, 0.125])
    return lines / n


@pytest.mark.parametrize("backend", ["numpy", "cpu"])
def test_jit_checks_donated_buffers_once_and_the_program_trusts_it(backend, monkeypatch):
    # jit's donation makes every donated buffer private (copying those it may not take),
    # so the program skips its own check (`runtime.own`), which direct calls still run
    from funcgrad.backends.numpy import render
    calls, real = [], render.own
    monkeypatch.setattr(render, "own", lambda *a: calls.append(1) or real(*a))
    step = fg.jit(lambda p, g: (p - 0.5 * g, g * 2.0), donate_argnums=0, backend=backend)
    p, g = fnp.ones(3) + 0.0, fnp.ones(3)
    user = np.ones(3, np.float32)
    shared = fnp.asarray(user)  # the user's buffer: donated as a copy
    p = step(p, g)[0]
    close(step(shared, g)[0], [0.5] * 3)
    assert np.all(user == 1.0) and jit_cache.is_deleted(shared)
    q = step(p, g)[0]
    close(q, [0.0] * 3)
    exe = step.lower(q, g).compile()._exe  # the program itself
    assert "_own(" in exe.as_text() and not calls
    x = np.ones(3, np.float32)
    out = exe(x, x)  # called directly: the program checks, and copies the shared buffer
    assert np.all(x == 1.0) and calls
    close(out[0], [0.5] * 3)


@pytest.mark.parametrize("backend", ["numpy", "cpu"])
def test_a_donated_buffer_only_its_array_holds_is_handed_over_not_copied(backend):
    """The program receives the donated Array's own buffer (the same ndarray) on every call
    of a training step; a buffer someone else also holds is copied first."""
    step = fg.jit(lambda p: p * 0.5, donate_argnums=0, backend=backend)
    p = step(fnp.ones(3) + 0.0)
    (entry,) = step._cache.entries.values()
    got, real = [], entry.exe
    entry.exe = lambda *vals, owned=False: got.append(vals[-1]) or real(*vals, owned=owned)
    for _ in range(3):
        buffer = id(p._value)  # (not the buffer itself: holding it would make it shared)
        p = step(p)
        assert id(got.pop()) == buffer  # (both alive during the call: ids tell them apart)
    held = p._value  # a second holder: the program gets a copy
    step(p)
    assert got.pop() is not held and np.array_equal(held, [0.0625] * 3)


def test_donation_bookkeeping_is_linear_in_the_number_of_arrays():
    # The checks once scanned every argument per donated argument: 400 donated arrays cost
    # ~8x the per-array work of 50. Linear bookkeeping keeps the per-array work flat.
    small, large = _lines_per_leaf(50), _lines_per_leaf(400)
    assert large < 1.25 * small, (small, large)


# --- the program cache --------------------------------------------------------------------------

def test_program_cache_is_keyed_by_program_backend_and_donation():
    f = fg.jit(lambda p, g: p - g, donate_argnums=0)
    f(fnp.ones(3) + 0.0, fnp.ones(3))
    (entry,) = f._cache.entries.values()
    assert jit_cache.programs.cached(entry.jaxpr) == [("exe", "cpu", (True, False))]
    assert "_funcgrad_cache" not in vars(entry.jaxpr)  # not hidden on the program
    f.clear_cache()
    assert jit_cache.programs.cached(entry.jaxpr) == []


def test_a_programs_record_goes_with_the_program_without_the_cycle_collector():
    closed = fg.make_jaxpr(lambda x: fnp.sin(x) * 2.0)(np.ones(3, np.float32))
    program, consts = closed, []
    outs = call.call_jaxpr(program, consts, [fnp.ones(3)], "direct", "cpu")
    close(outs[0], np.sin(np.ones(3)) * 2.0)
    assert jit_cache.programs.cached(program) == [("exe", "cpu", (False,))]
    records = len(jit_cache.programs._records)
    gc.disable()
    try:
        del closed, program
        assert len(jit_cache.programs._records) == records - 1
    finally:
        gc.enable()


# --- the counters -------------------------------------------------------------------------------

def test_counters_are_one_set_read_through_views():
    assert call.stats is jit_cache.stats.counts
    assert pipeline.stats is jit_cache.stats.pipeline
    f = fg.jit(lambda x: fnp.exp(x) + 1.0)
    name = f._name
    compiles, per_name = pipeline.stats["compiles"], call.stats["compile", name]
    f(fnp.ones(2))
    assert pipeline.stats["compiles"] == compiles + 1
    assert call.stats["compile", name] == per_name + 1
    for _ in range(3):
        f(fnp.ones(2))
    assert pipeline.stats["compiles"] == compiles + 1
    assert call.stats["compile", name] == per_name + 1
    info = f.cache_info()
    assert (info.hits, info.misses, info.traces, info.size) == (3, 1, 1, 1)


def test_a_compiled_call_with_jit_disabled_runs_the_function():
    calls = []

    def f(x):
        calls.append(1)
        return x * 2.0
    compiled = fg.jit(f).lower(fnp.ones(2)).compile()
    assert len(calls) == 1
    fg.config.update("disable_jit", True)
    try:
        close(compiled(fnp.ones(2)), [2.0, 2.0])
    finally:
        fg.config.update("disable_jit", False)
    assert len(calls) == 2


def test_tracing_and_compiling_pause_the_cyclic_collector_and_restore_it(monkeypatch):
    seen, compiling = [], []
    real = pipeline.compile_jaxpr

    def spy(*args, **kwargs):
        compiling.append(gc.isenabled())
        return real(*args, **kwargs)
    monkeypatch.setattr(pipeline, "compile_jaxpr", spy)

    def f(x):
        seen.append(gc.isenabled())
        return x * 2.0 + 1.0

    assert gc.isenabled()
    np.testing.assert_allclose(np.asarray(fg.jit(f)(np.ones(3, np.float32))), 3.0)
    assert seen == [False] and compiling == [False] and gc.isenabled()
    gc.disable()  # a user's own setting stays as it was
    try:
        fg.jit(f)(np.ones(4, np.float32))
        assert seen == [False, False] and not gc.isenabled()
    finally:
        gc.enable()
    with pytest.raises(ZeroDivisionError):  # and is restored when tracing raises
        fg.jit(lambda x: 1 / 0)(np.ones(3, np.float32))
    assert gc.isenabled()
