"""Tests for funcgrad.jit: the cache, static and donated arguments, composition with
grad/vmap, debugging (disable_jit, debug.print, debug_nans) and bad input."""

import gc
import sys
import warnings
import weakref

import numpy as np
import pytest

import funcgrad as fg
import funcgrad.numpy as fnp
from funcgrad import debug, errors
from funcgrad.compiler import call, jit_cache, pipeline
from funcgrad.compiler.jit import RetraceWarning
from funcgrad.core import Array, to_array
from funcgrad.interpreters import batching
from funcgrad.test_util import check_grads
from funcgrad.tree_util import register_pytree_node


def arr(*values, dtype=np.float32):
    return to_array(np.asarray(values, dtype))


def close(a, b, tol=1e-5):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=tol, atol=tol)


@pytest.fixture
def compiles(monkeypatch):
    """Records every compile_jaxpr call: a list of (jaxpr, donate_argnums)."""
    seen = []
    real = pipeline.compile_jaxpr

    def spy(closed, backend="cpu", donate_argnums=()):
        seen.append((closed, tuple(donate_argnums)))
        return real(closed, backend=backend, donate_argnums=donate_argnums)
    monkeypatch.setattr(pipeline, "compile_jaxpr", spy)
    return seen


@pytest.fixture
def retrace_limit():
    old = fg.config.retrace_warn_after
    yield lambda n: fg.config.update("retrace_warn_after", n)
    fg.config.update("retrace_warn_after", old)


def f_sin_exp(x):
    return fnp.sum(fnp.sin(x) * fnp.exp(x))  # tests jit it through lambdas or local functions


# --- calling and the cache ---------------------------------------------------------------------

def test_jit_matches_eager_for_pytrees():
    def f(p, x):
        return {"y": fnp.tanh(x @ p["w"] + p["b"]), "n": fnp.sum(x ** 2)}
    p = {"w": arr([1.0, 2.0], [3.0, 4.0]), "b": arr(0.5, -0.5)}
    x = arr([1.0, -1.0], [2.0, 0.5], [0.0, 1.0])
    got, want = fg.jit(f)(p, x), f(p, x)
    assert set(got) == {"y", "n"} and isinstance(got["y"], Array)
    close(got["y"], want["y"])
    close(got["n"], want["n"])


def test_cache_hit_does_not_retrace(compiles):
    jf = fg.jit(lambda x: f_sin_exp(x))
    x = fnp.arange(4.0)
    results = [jf(x) for _ in range(5)]
    assert jf.trace_count == 1 and len(compiles) == 1
    info = jf.cache_info()
    assert (info.hits, info.misses, info.size) == (4, 1, 1)
    for r in results:
        close(r, f_sin_exp(x))


def test_new_shape_dtype_or_weak_type_retraces(retrace_limit):
    retrace_limit(10)
    jf = fg.jit(lambda x: x * 2)
    jf(fnp.ones(3))
    jf(fnp.ones(4))
    assert jf.trace_count == 2
    assert jf.explain_last_miss() == "argument `x`: f32[3] -> f32[4]"
    jf(fnp.ones(4, dtype=np.int32))
    assert "argument `x`: f32[4] -> i32[4]" in jf.explain_last_miss()
    jf(2.0)
    jf(fnp.float32(2.0))
    assert jf.trace_count == 5
    assert "f32[] (weakly typed) -> f32[]" in jf.explain_last_miss()
    assert float(jf(2.0)) == 4.0 and jf(2.0).weak_type


def test_new_pytree_structure_is_a_new_entry():
    jf = fg.jit(lambda d: sum(d.values()))
    assert float(jf({"a": 1.0, "b": 2.0})) == 3.0
    assert float(jf({"a": 1.0, "b": 2.0, "c": 3.0})) == 6.0
    assert jf.trace_count == 2 and jf.cache_info().size == 2
    assert "structure" in jf.explain_last_miss() and "'c'" in jf.explain_last_miss()


def test_retrace_warning_names_the_changed_argument(retrace_limit):
    retrace_limit(2)
    jf = fg.jit(lambda batch: fnp.sum(batch["x"]) + fnp.sum(batch["y"]))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        jf({"x": fnp.ones((128, 784)), "y": fnp.ones(3)})
        jf({"x": fnp.ones((128, 784)), "y": fnp.ones(4)})
    with pytest.warns(RetraceWarning) as rec:
        jf({"x": fnp.ones((100, 784)), "y": fnp.ones(4)})
    text = str(rec[0].message)
    assert "argument `batch['x']`: f32[128,784] -> f32[100,784]" in text
    assert "traced 3 times" in text and "retrace_warn_after=2" in text
    assert rec[0].filename == __file__
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # once per function
        jf({"x": fnp.ones((99, 784)), "y": fnp.ones(4)})
    assert jf.trace_count == 4


def test_jit_in_a_loop_shares_the_cache_of_the_function(compiles):
    def f(x):
        return fnp.cos(x) * 2.0
    x = fnp.ones(3)
    for _ in range(3):
        fg.jit(f)(x)
    assert fg.jit(f).trace_count == 1 and len(compiles) == 1


def test_keyword_arguments_are_traced():
    def f(x, scale=1.0, *, shift):
        return x * scale + shift
    jf = fg.jit(f)
    close(jf(fnp.ones(2), shift=arr(1.0, 2.0)), [2.0, 3.0])
    close(jf(fnp.ones(2), scale=3.0, shift=arr(1.0, 2.0)), [4.0, 5.0])
    close(jf(fnp.ones(2), 3.0, shift=arr(1.0, 2.0)), [4.0, 5.0])
    assert jf.trace_count == 3


def test_x64_toggle_retraces():
    jf = fg.jit(lambda x: x + 1.0)
    jf(1.0)
    fg.config.update("enable_x64", True)
    assert jf(1.0).dtype == np.float64
    assert "enable_x64: False -> True" in jf.explain_last_miss()


# --- static arguments --------------------------------------------------------------------------

def test_static_argnums_and_argnames():
    def f(x, n, mode="sum"):
        for _ in range(n):  # Python control flow on a static value
            x = x * 2
        return fnp.sum(x) if mode == "sum" else fnp.max(x)
    jf = fg.jit(f, static_argnums=1, static_argnames="mode")
    x = arr(1.0, 3.0)
    assert float(jf(x, 2)) == 16.0 and float(jf(x, 3)) == 32.0
    assert float(jf(x, 2, mode="max")) == 12.0
    assert float(jf(x, n=2)) == 16.0  # static_argnums also covers the keyword form
    assert jf.trace_count == 3
    assert jf.explain_last_miss() == "static argument `mode`: <not passed> -> 'max'"


def test_static_value_change_is_explained():
    jf = fg.jit(lambda x, n: x * n, static_argnums=1)
    jf(fnp.ones(2), 2)
    jf(fnp.ones(2), 5)
    assert jf.explain_last_miss() == "static argument `n`: 2 -> 5"
    assert jf(fnp.ones(2), 2.0).dtype == np.float32  # 2 and 2.0 are different static values
    assert jf(fnp.ones(2), True).dtype == np.float32
    assert jf.trace_count == 4
    for n in (2, 5, 2.0, True, 2, 5):
        close(jf(fnp.ones(2), n), [float(n)] * 2)
    assert jf.trace_count == 4 and jf.cache_info().hits == 6


def test_unhashable_static_argument_names_it():
    jf = fg.jit(lambda x, sizes: x * len(sizes), static_argnums=1)
    with pytest.raises(errors.FuncgradTypeError, match=r"static argument `sizes`.*unhashable"):
        jf(fnp.ones(2), [1, 2])
    with pytest.raises(errors.FuncgradTypeError, match=r"static argument `sizes`.*unhashable"):
        jf(fnp.ones(2), fnp.ones(2))
    assert float(jf(fnp.ones(()), (1, 2))) == 2.0


def test_bad_static_argnums_are_reported():
    with pytest.raises(errors.FuncgradValueError, match="static_argnums"):
        fg.jit(lambda x: x, static_argnums=3)
    with pytest.raises(errors.FuncgradValueError, match="static_argnames"):
        fg.jit(lambda x: x, static_argnames="y")
    with pytest.raises(errors.FuncgradValueError, match="both static and donated"):
        fg.jit(lambda x, y: x, static_argnums=1, donate_argnums=1)


# --- donation ----------------------------------------------------------------------------------

def test_donation_reuses_and_deletes_the_argument(compiles):
    jf = fg.jit(lambda p, g: p - 0.5 * g, donate_argnums=0)
    p = arr(1.0, 2.0, 3.0) + 0.0  # an Array that owns its buffer
    p2 = jf(p, fnp.ones(3))
    close(p2, [0.5, 1.5, 2.5])
    assert compiles[-1][1] == (0,)
    assert jit_cache.is_deleted(p)
    with pytest.raises(jit_cache.DonatedArrayError, match="donated to jit"):
        p + 1.0
    p3 = jf(p2, fnp.ones(3))  # the output of a donating call can be donated again
    close(p3, [0.0, 1.0, 2.0])
    assert jf.trace_count == 1


def test_donation_never_overwrites_shared_buffers():
    jf = fg.jit(lambda p: p * 2.0, donate_argnums=0)
    user = np.ones(3, np.float32)
    x = fnp.asarray(user)  # shares the user's NumPy buffer
    close(jf(x), [2.0, 2.0, 2.0])
    assert np.all(user == 1.0)
    y = fnp.ones(3) + 0.0
    keep = np.asarray(y)  # a view of y's buffer held by the user
    jf(y)
    assert np.all(keep == 1.0)


def test_donating_an_argument_that_is_also_passed_again_is_an_error():
    jf = fg.jit(lambda a, b: a + b, donate_argnums=0)
    x = fnp.ones(3) + 0.0
    with pytest.raises(errors.FuncgradValueError, match=r"argument `a` is donated.*`b`"):
        jf(x, x)
    assert not jit_cache.is_deleted(x)


def test_donated_argument_returned_unchanged_passes_through(compiles):
    jf = fg.jit(lambda a, b: (a, a + b), donate_argnums=0)
    x = fnp.ones(3) + 0.0
    out, s = jf(x, fnp.ones(3))
    close(out, [1.0, 1.0, 1.0])
    close(s, [2.0, 2.0, 2.0])
    assert compiles[-1][1] == ()


def _donating_step_that_fails(after_write):
    """`step(x) = (x * 2 + 1, after_write(y))`, donating `x`, whose compiled call fails (on its
    second run) in `after_write`, a library call that runs after y may be written into x."""
    runs = []

    def step(x):
        y = x * 2.0 + 1.0
        return y, after_write(runs, y)
    return fg.jit(step, donate_argnums=0)


def _raise_on_second_run(runs, *values):
    runs.append(values)
    if len(runs) > 1:
        raise RuntimeError("the callback failed")


def test_failed_donating_call_deletes_the_donated_argument():
    jf = _donating_step_that_fails(
        lambda runs, y: debug.callback(lambda v: _raise_on_second_run(runs, v), y))
    close(jf(fnp.full((4,), 0.5) + 0.0)[0], [2.0] * 4)  # compiles, runs once
    x = fnp.full((4,), 0.5) + 0.0
    with pytest.raises(RuntimeError, match="the callback failed"):  # the user's own error
        jf(x)
    assert jit_cache.is_deleted(x)  # never silently holding y = 2.0
    with pytest.raises(jit_cache.DonatedArrayError, match=r"donated to jit\(step\).*call failed"):
        np.asarray(x)
    with pytest.raises(jit_cache.DonatedArrayError):
        x + 1.0
    y = fnp.full((4,), 0.5) + 0.0
    with pytest.raises(jit_cache.DonatedArrayError):
        jf(x)  # a deleted argument is refused before running: y stays intact
    close(y, [0.5] * 4)


def test_donated_argument_deleted_when_a_later_library_call_fails():
    from funcgrad.core import Primitive, ShapedArray

    def impl(y, **params):
        _raise_on_second_run(params["runs"].value, y)
        return y
    failing_p = Primitive("failing_after_write_test_op")
    failing_p.def_impl(impl)
    failing_p.def_abstract_eval(lambda y, **params: ShapedArray(y.shape, y.dtype, y.weak_type))

    class Box:  # a hashable param holding the list of runs
        def __init__(self, value):
            self.value = value

    def after_write(runs, y):
        z = fnp.sin(y) * 3.0  # more fused work into the reusable buffers first
        return failing_p.bind(z, runs=Box(runs))
    jf = _donating_step_that_fails(after_write)
    jf(fnp.full((4,), 0.5) + 0.0)
    x = fnp.full((4,), 0.5) + 0.0
    with pytest.raises(errors.FuncgradError, match="the callback failed"):
        jf(x)
    assert jit_cache.is_deleted(x)
    with pytest.raises(jit_cache.DonatedArrayError, match="call failed"):
        fnp.sum(x)


def test_unusable_donation_warns():
    jf = fg.jit(lambda a: fnp.sum(a), donate_argnums=0)
    with pytest.warns(UserWarning, match=r"donated buffers were not usable .*: `a` f32\[3\]"):
        jf(fnp.ones(3) + 0.0)


# --- composition -------------------------------------------------------------------------------

def test_grad_of_jit_runs_compiled_forward_and_backward(compiles):
    call.stats.clear()
    jf = fg.jit(f_sin_exp)
    x = fnp.linspace(-1.0, 1.0, 5)
    close(fg.grad(jf)(x), fg.grad(f_sin_exp)(x))
    names = {n for (kind, n) in call.stats if kind == "run"}
    assert {"f_sin_exp", "transpose(jvp(f_sin_exp))"} <= names
    # the forward call computed the residuals too: nothing of f runs a second time
    assert "residuals(jvp(f_sin_exp))" not in names and call.stats["run", "f_sin_exp"] == 1
    text = str(fg.make_jaxpr(fg.grad(jf))(x))
    assert "jit[" in text and "name=transpose(jvp(f_sin_exp))" in text
    n_compiles = len(compiles)
    for _ in range(3):
        close(fg.grad(jf)(x), fg.grad(f_sin_exp)(x))
    assert len(compiles) == n_compiles and jf.trace_count == 1
    assert call.stats["run", "transpose(jvp(f_sin_exp))"] == 4


def test_higher_order_derivatives_through_jit():
    def f(x):
        return fnp.sin(x) * fnp.exp(x) / (1.0 + x * x)
    jf = fg.jit(f)
    x = fnp.float32(0.7)
    close(fg.grad(fg.grad(jf))(x), fg.grad(fg.grad(f))(x), 1e-4)
    close(fg.grad(fg.grad(fg.grad(jf)))(x), fg.grad(fg.grad(fg.grad(f)))(x), 1e-3)
    out, t = fg.jvp(jf, (x,), (fnp.float32(1.0),))
    close(out, f(x))
    close(t, fg.grad(f)(x))
    check_grads(jf, (0.3,), order=2)
    check_grads(fg.jit(lambda a, b: fnp.sum(fnp.tanh(a) * b ** 2)),
                (np.linspace(-1, 1, 4), np.arange(4.0)), order=2)


def test_jit_of_grad_and_nested_jit():
    inner = fg.jit(lambda x: fnp.sin(x) * 3.0)

    def outer(x):
        return fnp.sum(inner(x) * inner(x + 1.0))
    jo = fg.jit(outer)
    x = fnp.linspace(0.0, 1.0, 4)
    close(jo(x), outer(x))
    low = jo.lower(x)
    assert str(low.jaxpr).count("jit[") == 2 and "name=<lambda>" in str(low.jaxpr)
    assert low.as_text().count("sin") == 2  # the compiler inlines nested calls
    close(fg.jit(fg.grad(outer))(x), fg.grad(outer)(x))
    close(fg.jit(fg.grad(jo))(x), fg.grad(outer)(x))
    close(fg.grad(jo)(x), fg.grad(outer)(x))


def test_partly_differentiable_arguments_and_integer_outputs():
    def f(x, n, y):
        return fnp.sum(x * n) + y * 2.0, fnp.argmax(x)
    jf = fg.jit(f)
    x, n = fnp.arange(3.0), fnp.arange(3)
    g = fg.grad(lambda x, y: jf(x, n, y)[0], argnums=(0, 1))(x, 2.0)
    close(g[0], [0.0, 1.0, 2.0])
    close(g[1], 2.0)
    assert int(jf(x, n, 1.0)[1]) == 2


def test_closed_over_arrays_are_inputs_not_literals():
    w = fnp.arange(1000.0) / 1000.0
    jf = fg.jit(lambda x: fnp.sum(x * w))
    x = fnp.ones(1000)
    close(jf(x), np.sum(np.arange(1000.0) / 1000.0), 1e-3)
    text = jf.lower(x).as_text()
    assert text.startswith("{ lambda ; a:f32[1000] b:f32[1000].")
    assert "0.999" not in text and len(text) < 400
    close(fg.grad(jf)(x), w)


def test_jit_under_grad_closing_over_a_traced_value():
    def f(x):
        return fg.jit(lambda y: fnp.sin(x * y))(2.0)
    close(fg.grad(f)(0.5), 2.0 * np.cos(1.0))

    captured = {}
    g = fg.jit(lambda y: y * captured["x"])

    def h(x):
        captured["x"] = x
        return g(3.0)
    close(fg.grad(h)(1.5), 3.0)
    close(fg.grad(h)(2.5), 3.0)
    assert g.trace_count == 2 and g.cache_info().size == 0
    assert "closes over values traced" in g.explain_last_miss()


def test_vmap_of_jit_is_a_jit_call_of_the_batched_program():
    jf = fg.jit(lambda x, w: fnp.sum(fnp.tanh(x * w)))
    xs, w = fnp.arange(6.0).reshape(2, 3), arr(0.1, 0.2, 0.3)
    want = [float(jf(xs[i], w)) for i in range(2)]
    close(fg.vmap(jf, in_axes=(0, None))(xs, w), want)
    text = str(fg.make_jaxpr(fg.vmap(jf, in_axes=(0, None)))(xs, w))
    assert "name=vmap(<lambda>)" in text and text.count("tanh") == 1
    jaxpr = fg.make_jaxpr(jf)(xs[0], w)
    outs, dims = batching.batch_eval(jaxpr.jaxpr, jaxpr.consts, [xs.T, w], [1, None])
    close(outs[0], want)
    assert dims == [0]
    close(fg.vmap(fg.grad(jf))(xs, fnp.stack([w, w])),
          [fg.grad(jf)(xs[i], w) for i in range(2)])


class Scaler:
    def __init__(self, k):
        self.k = k

    def scale(self, x):
        return x * self.k

    @fg.jit
    def offset(self, x):
        return x + self.k


register_pytree_node(Scaler, lambda s: ((s.k,), None), lambda _, kids: Scaler(*kids))


def test_jit_of_methods_and_lambdas():
    s = Scaler(fnp.float32(3.0))
    close(fg.jit(s.scale)(fnp.ones(2)), [3.0, 3.0])
    close(s.offset(fnp.ones(2)), [4.0, 4.0])  # self is a pytree argument
    close(fg.jit(lambda x: x - 1)(fnp.ones(2)), [0.0, 0.0])
    assert Scaler.offset.__name__ == "offset" and repr(Scaler.offset) == \
        "<jitted function offset>"


# --- lowering ----------------------------------------------------------------------------------

def test_lower_and_compile_show_the_ir_and_the_code():
    jf = fg.jit(lambda x: fnp.sin(x) * 2.0)
    x = fnp.zeros(3)
    low = jf.lower(x)
    assert "sin" in low.as_text() and low.as_text() == str(pipeline.optimize(low.jaxpr))
    comp = low.compile()
    assert isinstance(comp.as_text(), str) and comp.as_text()
    assert isinstance(comp.ir_text(), str)
    comp.memory_analysis()
    close(comp(fnp.ones(3)), np.sin(np.ones(3)) * 2)
    with pytest.raises(errors.FuncgradTypeError, match=r"argument `x`: f32\[3\] -> f32\[4\]"):
        comp(fnp.ones(4))


# --- debugging ---------------------------------------------------------------------------------

def test_disable_jit_runs_op_by_op():
    calls = []

    def f(x):
        calls.append(x)
        if float(fnp.sum(x)) > 0:  # Python control flow on values works without jit
            return x * 2
        return x
    jf = fg.jit(f)
    fg.config.update("disable_jit", True)
    close(jf(fnp.ones(2)), [2.0, 2.0])
    jf(fnp.ones(2))
    assert len(calls) == 2 and all(isinstance(c, Array) for c in calls)
    assert jf.trace_count == 0


def test_debug_print_inside_jit_prints_every_call(capsys):
    def f(x):
        debug.print("x = {} step {n}", x, n=3)
        return x * 2
    jf = fg.jit(f)
    jf(arr(1.0, 2.0))
    jf(arr(3.0, 4.0))
    assert capsys.readouterr().out == "x = [1. 2.] step 3\nx = [3. 4.] step 3\n"
    assert "debug_print" in jf.lower(arr(1.0, 2.0)).as_text()
    assert getattr(debug.debug_print_p, "effectful", False)
    f(arr(5.0))
    assert capsys.readouterr().out == "x = [5.] step 3\n"


def test_debug_print_under_grad_and_jit_of_grad_prints_once(capsys):
    def f(x):
        debug.print("value {}", x)
        return fnp.sum(x * x)
    fg.grad(fg.jit(f))(arr(1.0))
    assert capsys.readouterr().out == "value [1.]\n"
    fg.jit(fg.grad(f))(arr(2.0))
    assert capsys.readouterr().out == "value [2.]\n"
    fg.grad(f)(arr(3.0))
    assert capsys.readouterr().out == "value [3.]\n"


def test_debug_callback_inside_jit_and_vmap():
    seen = []
    jf = fg.jit(lambda x: (debug.callback(seen.append, x), x + 1)[1])
    jf(arr(1.0))
    jf(arr(2.0))
    assert [float(s[0]) for s in seen] == [1.0, 2.0]
    fg.vmap(jf)(arr(3.0, 4.0))  # once per example, as in JAX
    assert [np.asarray(s).tolist() for s in seen[2:]] == [3.0, 4.0]


def test_debug_nans_under_jit_names_the_primitive_and_the_line():
    def f(x):
        y = x * 2.0
        z = fnp.log(y)  # the NaN comes from here
        return z + 1.0
    jf = fg.jit(f)
    assert np.isnan(np.asarray(jf(arr(-1.0)))).all()  # off: NaNs flow through
    fg.config.update("debug_nans", True)
    with pytest.raises(FloatingPointError) as exc:
        jf(arr(-1.0))
    text = str(exc.value)
    assert "log" in text and "the NaN comes from here" in text and "re-run op by op" in text
    close(jf(arr(1.0)), np.log(2.0) + 1.0)


# --- bad input ---------------------------------------------------------------------------------

def test_non_array_leaf_error_names_the_path():
    jf = fg.jit(lambda batch: batch["x"] * 2)
    with pytest.raises(errors.FuncgradTypeError) as exc:
        jf({"x": fnp.ones(2), "name": "digits"})
    text = str(exc.value)
    assert "argument `batch['name']` is a str ('digits')" in text
    assert "static_argnames=('batch',)" in text and __file__ in text


def test_non_array_output_is_an_error():
    with pytest.raises(errors.FuncgradTypeError, match=r"returned a str at output \[1\]"):
        fg.jit(lambda x: (x, "done"))(fnp.ones(2))


def test_python_control_flow_on_traced_values_names_the_argument():
    def f(x, n):
        if n > 0:
            return x
        return -x
    with pytest.raises(errors.ConcretizationTypeError) as exc:
        fg.jit(f)(fnp.ones(2), 3)
    text = str(exc.value)
    assert "if n > 0:" in text and "lax.cond" in text
    assert "depends on argument(s) `n`" in text and "static_argnames=('n',)" in text
    close(fg.jit(f, static_argnames="n")(fnp.ones(2), 3), [1.0, 1.0])


def test_unknown_backend_lists_the_known_ones():
    with pytest.raises(errors.FuncgradValueError, match="'tpu'.*'cpu', 'cuda'"):
        fg.jit(lambda x: x, backend="tpu")


def test_cuda_without_cupy_says_how_to_install(monkeypatch):
    from funcgrad.backends.cuda import program
    from funcgrad.devices import CupyProvider, set_cuda_provider
    monkeypatch.setitem(sys.modules, "cupy", None)  # `import cupy` fails
    old_rt, old_provider = program.set_runtime(None), set_cuda_provider(CupyProvider())
    try:
        jf = fg.jit(lambda x: x * 2, backend="cuda")
        with pytest.raises(call.BackendUnavailableError,
                           match=r"(?s)CuPy.*pip install funcgrad\[cuda13\]"):
            jf(fnp.ones(2))
    finally:
        program.set_runtime(old_rt)
        set_cuda_provider(old_provider)


def test_failure_of_generated_code_is_reported_as_a_funcgrad_bug(monkeypatch):
    source = "def run(a):\n    b = a + 1\n    return [a.no_such_method()]\n"
    namespace = {}
    exec(compile(source, "<funcgrad-generated-test>", "exec"), namespace)

    class Broken:
        def __call__(self, *vals):
            return namespace["run"](*vals)

        def as_text(self):
            return source
    monkeypatch.setattr(pipeline, "compile_jaxpr", lambda *a, **k: Broken())
    jf = fg.jit(lambda x: x * 3.0)
    with pytest.raises(errors.FuncgradInternalError) as exc:
        jf(fnp.ones(2))
    text = str(exc.value)
    assert "funcgrad bug" in text and "return [a.no_such_method()]" in text
    assert "AttributeError" in text


def test_the_cache_does_not_pin_programs_of_dead_functions():
    def make():
        w = fnp.ones(4)
        return lambda x: x * w
    f = make()
    jf = fg.jit(f)
    jf(fnp.ones(4))
    jf(fnp.ones(4))
    ref = weakref.ref(next(iter(jf._cache.entries.values())).jaxpr)
    assert any(k[0] == "exe" for k in jit_cache.programs.cached(ref()))
    del f, jf
    gc.collect()
    assert ref() is None


def test_tracer_leak_through_jit_is_reported():
    leaked = []
    fg.grad(lambda x: leaked.append(x) or x * 1.0)(1.0)
    with pytest.raises(errors.TracerLeakError):
        fg.jit(lambda x: x + 1.0)(leaked[0])


def test_runtime_failure_inside_compiled_code_names_the_equation():
    from funcgrad.core import Primitive, ShapedArray

    def impl(x):
        if x.shape[0] > 2:
            raise ValueError("boom")
        return x
    fragile_p = Primitive("fragile_test_op")
    fragile_p.def_impl(impl)
    fragile_p.def_abstract_eval(lambda x: ShapedArray(x.shape, x.dtype, x.weak_type))
    jf = fg.jit(lambda x: fragile_p.bind(x * 2.0) + 1.0)
    with pytest.raises(errors.FuncgradInternalError) as exc:
        jf(fnp.ones(3))
    text = str(exc.value)
    assert "funcgrad bug" in text and "ValueError: boom" in text
    assert "generated line" in text and "fragile_test_op a" in text  # the line and the eqn


def test_lowered_memory_analysis_predicts_peak_bytes():
    x = fnp.ones((100, 100))
    mem = fg.jit(lambda x: (x * 2 + 1).sum(0)).lower(x).memory_analysis()
    # the argument alone is 40000 bytes; the peak must count it and the temporaries
    assert mem.argument_size_in_bytes == 40000
    assert mem.peak_bytes >= mem.argument_size_in_bytes + mem.output_size_in_bytes


def test_numpy_arguments_take_the_cached_fast_path():
    f = fg.jit(lambda t: [a * 2 for a in t])
    xs = [np.full(3, i, np.float32) for i in range(4)]
    first = f(xs)
    assert f._cache.entries, "a call with canonical numpy leaves registers a cache entry"
    again = f(xs)
    for i, (a, b) in enumerate(zip(first, again)):
        np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(b, np.full(3, 2 * i))
    # float64 numpy input is canonicalized (slow path), giving the same program
    f([x.astype(np.float64) for x in xs])
    assert f.trace_count == 1
