"""The numpy backend: golden generated source for canonical functions, compiled == eager,
buffers and donation, errors that point at the generated line, profiling, and the hook for
higher-order primitives."""

import re
import traceback

import numpy as np
import pytest

import funcgrad as fg
import funcgrad.numpy as fnp
from funcgrad import errors, lax
from funcgrad.backends.numpy import compile_program, higher_order_rules
from funcgrad.compiler import fusion, pipeline
from funcgrad.core import Primitive, ShapedArray, eval_jaxpr

rng = np.random.default_rng(0)


def relu(x):
    return fnp.maximum(x, 0.0)


def mlp_layer(x, w, b):
    return relu(x @ w + b)


def softmax(x):
    e = fnp.exp(x - fnp.max(x, axis=-1, keepdims=True))
    return e / fnp.sum(e, axis=-1, keepdims=True)


def gelu(x):
    return 0.5 * x * (1.0 + fnp.tanh(0.7978845608 * (x + 0.044715 * x * x * x)))


def adam(p, g, m, v, lr_t):
    m = 0.9 * m + 0.1 * g
    v = 0.999 * v + 0.001 * g * g
    return p - lr_t * m / (fnp.sqrt(v) + 1e-8), m, v


def top2_sum(x):
    return fnp.sort(x, axis=-1)[:, -2:].sum()


def compile_fn(f, *args, donate_argnums=()):
    closed = fg.make_jaxpr(f)(*args)
    return closed, pipeline.compile_jaxpr(closed, donate_argnums=donate_argnums)


def normalized(source):
    """Program numbers and line numbers vary between runs and edits: mask them."""
    source = re.sub(r"fg_jit_\d+", "fg_jit_N", source)
    source = re.sub(r"jit program \d+", "jit program N", source)
    return re.sub(r"(test_codegen\.py):\d+", r"\1:L", source)


def check_matches_eager(closed, exe, *args, rtol=1e-5, atol=1e-6):
    ref = eval_jaxpr(closed.jaxpr, closed.consts, *args)
    got = exe(*args)
    assert len(got) == len(ref)
    for r, g in zip(ref, got):
        r = np.asarray(r)
        assert isinstance(g, np.ndarray) and g.dtype == r.dtype and g.shape == r.shape
        np.testing.assert_allclose(g, r, rtol=rtol, atol=atol)


x48 = rng.normal(size=(4, 8)).astype(np.float32)
w816 = rng.normal(size=(8, 16)).astype(np.float32)
b16 = rng.normal(size=(16,)).astype(np.float32)

GOLDEN_MLP_LAYER = """\
# funcgrad jit program N: 3 inputs, 1 outputs, 1 kernels, 1 calls
def fg_jit_N(a0, a1, a2):
    # a0: f32[4,8]
    # a1: f32[8,16]
    # a2: f32[16]
    b0 = np.matmul(a0, a1)                                # test_codegen.py:L (mlp_layer)
    # kernel k1_add_max: float32[4, 16]
    np.add(b0, a2, out=b0)                                # test_codegen.py:L (mlp_layer)
    np.maximum(b0, 0.0, out=b0)                           # test_codegen.py:L (relu)
    return [b0]
"""

GOLDEN_SOFTMAX = """\
# funcgrad jit program N: 1 inputs, 1 outputs, 3 kernels, 0 calls
def fg_jit_N(a0):
    # a0: f32[4,8]
    # kernel k0_max: float32[4, 8], reduces axes (1,)
    b0 = np.maximum.reduce(a0, axis=1)                    # test_codegen.py:L (softmax)
    # kernel k1_sub_exp: float32[4, 8], reduces axes (1,)
    b1 = np.subtract(a0, b0.reshape(4, 1))                # test_codegen.py:L (softmax)
    np.exp(b1, out=b1)                                    # test_codegen.py:L (softmax)
    np.add.reduce(b1, axis=1, out=b0)                     # test_codegen.py:L (softmax)
    # kernel k2_div: float32[4, 8]
    np.divide(b1, b0.reshape(4, 1), out=b1)               # test_codegen.py:L (softmax)
    del b0
    return [b1]
"""

GOLDEN_GELU = """\
# funcgrad jit program N: 1 inputs, 1 outputs, 1 kernels, 0 calls
def fg_jit_N(a0):
    # a0: f32[4,8]
    # kernel k0_mul_add_tanh: float32[4, 8]
    b0 = np.multiply(0.5, a0)                             # test_codegen.py:L (gelu)
    b1 = np.multiply(0.044714998453855515, a0)            # test_codegen.py:L (gelu)
    np.multiply(b1, a0, out=b1)                           # test_codegen.py:L (gelu)
    np.multiply(b1, a0, out=b1)                           # test_codegen.py:L (gelu)
    np.add(a0, b1, out=b1)                                # test_codegen.py:L (gelu)
    np.multiply(0.7978845834732056, b1, out=b1)           # test_codegen.py:L (gelu)
    np.tanh(b1, out=b1)                                   # test_codegen.py:L (gelu)
    np.add(1.0, b1, out=b1)                               # test_codegen.py:L (gelu)
    np.multiply(b0, b1, out=b0)                           # test_codegen.py:L (gelu)
    del b1
    return [b0]
"""

GOLDEN_ADAM_DONATED = """\
# funcgrad jit program N: 5 inputs, 3 outputs, 1 kernels, 0 calls
def fg_jit_N(a0, a1, a2, a3, a4, _owned=False):
    # a0: f32[4,8]
    # a1: f32[4,8]
    # a2: f32[4,8]
    # a3: f32[4,8]
    # a4: f32[]
    if not _owned:
        a0, a2, a3 = _own((a0, a1, a2, a3, a4), (0, 2, 3))
    # kernel k0_mul_add_sqrt_div_sub: float32[4, 8]
    np.multiply(0.8999999761581421, a2, out=a2)           # test_codegen.py:L (adam)
    b3 = np.multiply(0.10000000149011612, a1)             # test_codegen.py:L (adam)
    np.add(a2, b3, out=a2)                                # test_codegen.py:L (adam)
    np.multiply(0.9990000128746033, a3, out=a3)           # test_codegen.py:L (adam)
    np.multiply(0.0010000000474974513, a1, out=b3)        # test_codegen.py:L (adam)
    np.multiply(b3, a1, out=b3)                           # test_codegen.py:L (adam)
    np.add(a3, b3, out=a3)                                # test_codegen.py:L (adam)
    np.multiply(a4, a2, out=b3)                           # test_codegen.py:L (adam)
    b4 = np.sqrt(a3)                                      # test_codegen.py:L (adam)
    np.add(b4, 9.99999993922529e-09, out=b4)              # test_codegen.py:L (adam)
    np.divide(b3, b4, out=b3)                             # test_codegen.py:L (adam)
    del b4
    np.subtract(a0, b3, out=a0)                           # test_codegen.py:L (adam)
    del b3
    return [a0, a2, a3]
"""

GOLDEN_LIBRARY_CALLS = """\
# funcgrad jit program N: 1 inputs, 1 outputs, 1 kernels, 2 calls
def fg_jit_N(a0):
    # a0: f32[4,8]
    v0, = _sort_0(a0)                                     # test_codegen.py:L (top2_sum)
    v1 = _slice_0(v0)                                     # test_codegen.py:L (top2_sum)
    # kernel k2_sum: float32[4, 2], reduces axes (0, 1)
    s0 = np.add.reduce(v1, axis=(0, 1))                   # test_codegen.py:L (top2_sum)
    del v0, v1
    return [np.asarray(s0)]
"""


@pytest.mark.parametrize("f, args, donate, golden", [
    (mlp_layer, (x48, w816, b16), (), GOLDEN_MLP_LAYER),
    (softmax, (x48,), (), GOLDEN_SOFTMAX),
    (gelu, (x48,), (), GOLDEN_GELU),
    (adam, (x48, x48, x48, np.abs(x48), np.float32(0.1)), (0, 2, 3), GOLDEN_ADAM_DONATED),
    (top2_sum, (x48,), (), GOLDEN_LIBRARY_CALLS),
], ids=["mlp_layer", "softmax", "gelu", "adam_donated", "library_calls"])
def test_golden_source_and_compiled_equals_eager(f, args, donate, golden):
    closed, exe = compile_fn(f, *args, donate_argnums=donate)
    assert normalized(exe.as_text()) == golden
    args = [np.array(a) for a in args]  # donated buffers are overwritten
    check_matches_eager(closed, exe, *[np.array(a) for a in args])


def test_compiled_source_compiles_in_its_own_file_and_shows_in_tracebacks():
    _, exe = compile_fn(softmax, x48)
    assert exe.as_text().splitlines()[1].startswith("def fg_jit_")
    assert "kernel" in exe.ir_text() or "reduce_max" in exe.ir_text()


def test_compile_counter_counts_each_compilation():
    before = pipeline.stats["compiles"]
    compile_fn(gelu, x48)
    compile_fn(gelu, x48)
    assert pipeline.stats["compiles"] == before + 2
    assert set(pipeline.stats["last_seconds"]) == {"optimize", "fuse", "render"}


# --- buffers, donation, aliasing ---------------------------------------------------------------

def test_elementwise_chain_runs_in_place_with_no_temporaries():
    closed, exe = compile_fn(lambda x: fnp.sin(fnp.exp(x) * 2.0 + 1.0), x48)
    src = exe.as_text()
    assert src.count("b0 = ") == 1 and "b1" not in src
    mem = exe.memory_analysis()
    assert mem.argument_bytes == x48.nbytes and mem.output_bytes == x48.nbytes
    assert mem.temp_bytes == 0 and mem.peak_bytes == 2 * x48.nbytes
    check_matches_eager(closed, exe, x48)


def test_donated_argument_is_reused_for_the_result():
    closed, exe = compile_fn(lambda x: fnp.sin(x) * 2.0, x48, donate_argnums=(0,))
    arg = x48.copy()
    out = exe(arg)[0]
    assert out is arg
    np.testing.assert_allclose(out, np.sin(x48) * 2.0, rtol=1e-6)
    assert exe.memory_analysis().alias_bytes == x48.nbytes


def test_donated_argument_that_is_not_owned_is_copied_first():
    _, exe = compile_fn(lambda x: fnp.sin(x) * 2.0, x48, donate_argnums=(0,))
    base = x48.copy()
    view = base[:]  # a view: the program must not write through it
    out = exe(view)[0]
    np.testing.assert_array_equal(base, x48)
    np.testing.assert_allclose(out, np.sin(x48) * 2.0, rtol=1e-6)
    _, exe = compile_fn(lambda x, y: (fnp.sin(x), y * 2.0), x48, x48, donate_argnums=(0, 1))
    same = x48.copy()  # one array donated twice: neither may be overwritten
    a, b = exe(same, same)
    assert a is not same and b is not same
    np.testing.assert_array_equal(same, x48)


def test_results_never_alias_arguments_that_were_not_donated():
    c = np.arange(4, dtype=np.float32)
    closed, exe = compile_fn(lambda x: (x, x.T, x[1:], x, fnp.reshape(x, (32,)) + c[0]), x48)
    outs = exe(x48)
    for o in outs:
        assert not np.shares_memory(o, x48)
    assert outs[0] is not outs[3]
    check_matches_eager(closed, exe, x48)


def test_results_never_alias_each_other():
    closed, exe = compile_fn(lambda x: (lambda y: (y.T, y, y[1:]))(fnp.sin(x)), x48)
    a, b, c = exe(x48)
    assert not np.shares_memory(a, b) and not np.shares_memory(b, c)
    assert not np.shares_memory(a, c)
    check_matches_eager(closed, exe, x48)


def test_consts_are_bound_once_and_never_returned_writable():
    table = rng.normal(size=(4, 8)).astype(np.float32)
    closed, exe = compile_fn(lambda x: (x * table, table), x48)
    assert "c0" in exe.as_text()
    a, t = exe(x48)
    t += 1.0  # a result is the caller's to change
    np.testing.assert_allclose(exe(x48)[1], table)
    np.testing.assert_allclose(a, x48 * table, rtol=1e-6)


def test_large_temporaries_are_kept_between_calls_but_never_returned():
    big = rng.normal(size=(256, 256)).astype(np.float32)
    closed, exe = compile_fn(lambda x: fnp.tanh(x @ x) @ x, big)
    assert "_ws.take()" in exe.as_text()
    first = exe(big)[0]
    second = exe(big)[0]
    assert not np.shares_memory(first, second)
    np.testing.assert_array_equal(first, second)
    check_matches_eager(closed, exe, big, rtol=1e-4, atol=1e-4)
    assert exe.memory_analysis().workspace_bytes == big.nbytes


def test_dead_buffers_are_released_and_peak_is_predicted():
    def chain(x):
        y = fnp.exp(x)
        z = y @ y.T  # y is dead after the product
        return fnp.tanh(z) * 2.0
    big = rng.normal(size=(64, 64)).astype(np.float32)
    closed, exe = compile_fn(chain, big)
    assert "del b0" in exe.as_text()
    mem = exe.memory_analysis()
    assert mem.peak_bytes <= 3 * big.nbytes
    assert "peak" in str(mem)
    check_matches_eager(closed, exe, big, rtol=1e-4)


# --- all kinds of programs compile --------------------------------------------------------------

@pytest.mark.parametrize("f", [
    lambda x: fnp.cumsum(x, axis=1),
    lambda x: fnp.argmax(x, axis=0),
    lambda x: x[np.array([0, 2, 2])],
    lambda x: x.at[np.array([1, 1])].add(1.0),
    lambda x: fnp.concatenate([x, fnp.flip(x, 0)]),
    lambda x: lax.erf(x) + lax.logistic(x),
    lambda x: fnp.where(x > 0, x, 0.0).astype(np.int32) % 3,
    lambda x: (x > 0).sum(),
    lambda x: fnp.einsum("ij,kj->ik", x, x),
    lambda x: lax.conv_general_dilated(x[None, None], fnp.ones((1, 1, 2, 2)), (1, 1), "VALID"),
    lambda x: lax.reduce_max(x[:0], (0,)),
    lambda x: 3.0,
    lambda x: fnp.float32(2.0) * x.sum(),
], ids=["cumsum", "argmax", "gather", "scatter", "concat", "erf_logistic", "int_mod",
        "bool_sum", "einsum", "conv", "empty_max", "literal_out", "scalar"])
def test_every_kind_of_primitive_compiles(f):
    closed, exe = compile_fn(f, x48)
    check_matches_eager(closed, exe, x48, rtol=1e-5)


def test_select_against_zero_is_bit_exact():
    special = np.array([[1.0, -2.0, np.inf, -np.inf, np.nan, -0.0, 0.0, 3.0]], np.float32)

    def f(x):
        s = x[0, 0] * x[0, 1]  # a 0-d value
        return (fnp.where(x > 0, x, 0.0), fnp.where(x > 0, 0.0, x), fnp.where(s > 0, 0.0, s),
                fg.grad(lambda x: fnp.where(x > 0, x, 0.0).sum())(x))
    closed, exe = compile_fn(f, special)
    assert "bitwise_and" in exe.as_text()
    for got, want in zip(exe(special), eval_jaxpr(closed.jaxpr, closed.consts, special)):
        want = np.asarray(want)
        assert got.dtype == want.dtype and got.shape == want.shape
        assert np.array_equal(got.view(np.int32), want.view(np.int32))  # same bits


def test_integer_and_boolean_programs():
    i = rng.integers(-5, 5, size=(3, 4)).astype(np.int32)
    closed, exe = compile_fn(lambda i: ((i * 3 + 1) // 2, i > 0, fnp.maximum(i, 0).sum(0)), i)
    check_matches_eager(closed, exe, i)


# --- errors --------------------------------------------------------------------------------------

_fail = {"now": False}


def _flaky_impl(x):
    if _fail["now"]:
        raise ValueError("boom")
    return x + 1


flaky_p = Primitive("flaky")
flaky_p.def_impl(_flaky_impl)
flaky_p.def_abstract_eval(lambda x: ShapedArray(x.shape, x.dtype))


def test_runtime_failure_is_an_internal_error_naming_line_and_equation():
    closed, exe = compile_fn(lambda x: fnp.sin(flaky_p.bind(fnp.cos(x))), x48)
    exe(x48)
    _fail["now"] = True
    try:
        with pytest.raises(errors.FuncgradInternalError) as info:
            exe(x48)
    finally:
        _fail["now"] = False
    msg = str(info.value)
    assert "ValueError: boom" in msg and "funcgrad bug" in msg
    assert "_flaky_0(" in msg  # the generated line
    assert "= flaky " in msg  # the IR equation
    assert "test_codegen.py" in msg  # the user's line it was traced from
    tb = "".join(traceback.format_exception(info.value.__cause__))
    assert "_flaky_0(" in tb  # tracebacks show the generated source


# --- profiling -----------------------------------------------------------------------------------

def test_profile_times_every_statement():
    _, exe = compile_fn(mlp_layer, x48, w816, b16)
    prof = exe.profile(x48, w816, b16, repeat=3)
    labels = [r[1] for r in prof.rows]
    assert sorted(labels) == ["add", "dot_general", "max"]
    assert prof.total > 0 and "dot_general" in str(prof)
    assert dict(prof.by_label()).keys() == {"add", "dot_general", "max"}


# --- higher-order primitives --------------------------------------------------------------------

def test_a_call_that_is_not_inlined_runs_as_a_compiled_subprogram():
    inner = fg.make_jaxpr(gelu)(x48)
    jit_p = Primitive("jit", multiple_results=True)
    jit_p.calls_body = True
    jit_p.def_abstract_eval(lambda *avals, jaxpr: list(jaxpr.out_avals))
    closed = fg.make_jaxpr(lambda x: jit_p.bind(fnp.sin(x), jaxpr=inner)[0] + 1.0)(x48)
    exe = pipeline.compile_jaxpr(closed, optimize_ir=False)
    assert re.search(r"v0, = call0\(b0\)", exe.as_text())
    np.testing.assert_allclose(exe(x48)[0], pipeline.compile_jaxpr(inner)(np.sin(x48))[0] + 1,
                               rtol=1e-6)


def test_sub_programs_compile_through_the_callback_the_pipeline_passes():
    """The backend imports no compiler pass: `compile_program` gets a `compile_subprogram`
    callback (the pipeline's), and a program with sub-programs but no callback is a bug."""
    cond = fg.make_jaxpr(lambda p, x: lax.cond(p, fnp.sin, fnp.cos, x))(True, x48)
    program = fusion.fuse(pipeline.optimize(cond))
    seen = []

    def compile_sub(closed):
        seen.append(closed)
        return pipeline.compile_jaxpr(closed)
    exe = compile_program(program, (), None, compile_subprogram=compile_sub)
    assert len(seen) == 2  # both branches
    np.testing.assert_allclose(exe(np.bool_(False), x48)[0], np.cos(x48), rtol=1e-6)
    with pytest.raises(errors.FuncgradInternalError, match="compile_subprogram"):
        compile_program(program, (), None)


def _repeat_rule(r, eqn):
    body = r.compile_subprogram(eqn.params["body"])
    (out,) = r.output_names(eqn)
    return [f"{out} = {r.read(eqn.invars[0])}",
            f"for _ in range({eqn.params['n']}):",
            f"    {out}, = {body}({out})"]


repeat_p = Primitive("repeat_body")
repeat_p.def_abstract_eval(lambda x, body, n: x)


def test_higher_order_rules_hook_renders_python_control_flow():
    body = fg.make_jaxpr(lambda z: fnp.cos(z) * 0.5)(x48)
    closed = fg.make_jaxpr(lambda x: repeat_p.bind(x, body=body, n=3))(x48)
    higher_order_rules[repeat_p] = _repeat_rule
    try:
        exe = pipeline.compile_jaxpr(closed)
    finally:
        del higher_order_rules[repeat_p]
    assert "for _ in range(3):" in exe.as_text()
    want = x48
    for _ in range(3):
        want = np.cos(want) * 0.5
    np.testing.assert_allclose(exe(x48)[0], want, rtol=1e-6)


def test_jit_of_grad_equals_eager_grad():
    def loss(w, x):
        return fnp.sum(softmax(gelu(x @ w)) ** 2)
    closed, exe = compile_fn(fg.grad(loss), w816, x48)
    check_matches_eager(closed, exe, w816, x48, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(exe(w816, x48)[0], np.asarray(fg.grad(loss)(w816, x48)),
                               rtol=1e-4, atol=1e-6)


# --- large kernels run as loops over row chunks ----------------------------------------------

def tanh_rows(x, v):
    y = fnp.tanh(x * fnp.exp(v) + 1.0)
    return y, fnp.sum(y * y, axis=1)


GOLDEN_CHUNKED = """\
# funcgrad jit program N: 2 inputs, 2 outputs, 2 kernels, 0 calls
def fg_jit_N(a0, a1):
    # a0: f32[2000,300]
    # a1: f32[300]
    _w = _ws.take()  # temporaries kept between calls
    t0, = _w
    # kernel k0_exp: float32[300]
    b0 = np.exp(a1)                                       # test_codegen.py:L (tanh_rows)
    b1 = np.empty((2000, 300), np.float32)
    b2 = np.empty((2000,), np.float32)
    for r in range(0, 2000, 873):  # kernel k1_mul_add_tanh, 3 chunks of 873 rows
        o0 = b1[r:r + 873]
        o1 = b2[r:r + 873]
        x0 = a0[r:r + 873]
        if r + 873 > 2000:
            t0 = t0[:2000 - r]
        np.multiply(x0, b0, out=t0)                       # test_codegen.py:L (tanh_rows)
        np.add(t0, 1.0, out=t0)                           # test_codegen.py:L (tanh_rows)
        np.tanh(t0, out=o0)                               # test_codegen.py:L (tanh_rows)
        np.multiply(o0, o0, out=t0)                       # test_codegen.py:L (tanh_rows)
        np.add.reduce(t0, axis=1, out=o1)                 # test_codegen.py:L (tanh_rows)
    del o0, o1, x0
    del b0
    _ws.give(_w)
    return [b1, b2]
"""


def test_large_kernel_is_a_chunked_loop_with_hoisted_invariants():
    big = rng.normal(size=(2000, 300)).astype(np.float32)
    v = rng.normal(size=(300,)).astype(np.float32)
    closed, exe = compile_fn(tanh_rows, big, v)
    assert normalized(exe.as_text()) == GOLDEN_CHUNKED
    for _ in range(2):  # the second call reuses the first call's chunk buffer
        check_matches_eager(closed, exe, big, v, rtol=1e-5, atol=1e-5)
    mem = exe.memory_analysis()
    assert mem.temp_bytes < big.nbytes // 2 and mem.workspace_bytes == 873 * 300 * 4


def test_chunked_adam_updates_donated_state_in_place():
    shape = (1100, 512)
    p, g, m, v = (rng.normal(size=shape).astype(np.float32) for _ in range(4))
    v = np.abs(v)
    closed, exe = compile_fn(adam, p, g, m, v, np.float32(0.01), donate_argnums=(0, 2, 3))
    assert "for r in range(0, 1100, 512):" in exe.as_text()
    want = [np.asarray(o) for o in eval_jaxpr(closed.jaxpr, closed.consts, p, g, m, v,
                                              np.float32(0.01))]
    args = [p.copy(), g, m.copy(), v.copy()]
    out = exe(*args, np.float32(0.01))
    assert out[0] is args[0] and out[1] is args[2] and out[2] is args[3]
    for o, w in zip(out, want):
        np.testing.assert_allclose(o, w, rtol=1e-5, atol=1e-7)
