"""The core: golden printed IR, the IR checker, tracing errors and the rule-table coverage."""

import gc
import importlib
import pkgutil
import weakref

import numpy as np
import pytest

import funcgrad as fg
import funcgrad.numpy as fnp
from funcgrad import errors
from funcgrad.core import (
    Eqn,
    Jaxpr,
    JaxprTypeError,
    Primitive,
    ShapedArray,
    Var,
    typecheck_jaxpr,
)
from funcgrad.interpreters import ad, batching

GOLDEN = {
    "sin": (lambda x: fnp.sin(x), (fnp.zeros(3),),
            "{ lambda ; a:f32[3]. let b:f32[3] = sin a in (b,) }"),
    "weak_scalar": (lambda x: x * 2.0 + 1, (fnp.zeros(3),), """\
{ lambda ; a:f32[3]. let
    b:f32[3] = mul a 2.0:f32[]
    c:f32[3] = add b 1.0:f32[]
  in (c,) }"""),
    "broadcast_add": (lambda x, y: x + y, (fnp.zeros((2, 3)), fnp.zeros(3)), """\
{ lambda ; a:f32[2,3] b:f32[3]. let
    c:f32[2,3] = broadcast_in_dim[broadcast_dimensions=(1,) shape=(2, 3)] b
    d:f32[2,3] = add a c
  in (d,) }"""),
    "matmul": (lambda x, w: x @ w, (fnp.zeros((4, 3)), fnp.zeros((3, 2))), """\
{ lambda ; a:f32[4,3] b:f32[3,2]. let
    c:f32[4,2] = dot_general[dimension_numbers=(((1,), (0,)), ((), ())) precision=None \
preferred_element_type=None] a b
  in (c,) }"""),
    "sum_keepdims": (lambda x: x.sum(axis=1, keepdims=True), (fnp.zeros((2, 3)),), """\
{ lambda ; a:f32[2,3]. let
    b:f32[2] = reduce_sum[axes=(1,)] a
    c:f32[2,1] = reshape[new_sizes=(2, 1)] b
  in (c,) }"""),
    "mean_int": (lambda x: fnp.mean(x), (fnp.zeros(4, dtype=fnp.int32),), """\
{ lambda ; a:i32[4]. let
    b:f32[4] = convert_element_type[new_dtype=f32 weak_type=False] a
    c:f32[] = reduce_sum[axes=(0,)] b
    d:f32[] = div c 4.0:f32[]
  in (d,) }"""),
    "where": (lambda x: fnp.where(x > 0, x, 0.0), (fnp.zeros(3),), """\
{ lambda ; a:f32[3]. let
    b:bool[3] = gt a 0.0:f32[]
    c:f32[3] = broadcast_in_dim[broadcast_dimensions=() shape=(3,)] 0.0:f32[]
    d:f32[3] = select_n b c a
  in (d,) }"""),
    "reshape_transpose": (lambda x: x.reshape(3, 2).T, (fnp.zeros(6),), """\
{ lambda ; a:f32[6]. let
    b:f32[3,2] = reshape[new_sizes=(3, 2)] a
    c:f32[2,3] = transpose[permutation=(1, 0)] b
  in (c,) }"""),
    "index_slice": (lambda x: x[1:, 0], (fnp.zeros((3, 4)),), """\
{ lambda ; a:f32[3,4]. let
    b:f32[2,1] = slice[limit_indices=(3, 1) start_indices=(1, 0) strides=None] a
    c:f32[2] = reshape[new_sizes=(2,)] b
  in (c,) }"""),
    "tuple_out": (lambda x: (x + 1, x * x), (fnp.zeros(2),), """\
{ lambda ; a:f32[2]. let
    b:f32[2] = add a 1.0:f32[]
    c:f32[2] = mul a a
  in (b, c) }"""),
    "astype": (lambda x: x.astype(fnp.int32), (fnp.zeros(2),), """\
{ lambda ; a:f32[2]. let
    b:i32[2] = convert_element_type[new_dtype=i32 weak_type=False] a
  in (b,) }"""),
    "int_literal_promotes": (lambda i: i + 1.5, (fnp.zeros(2, dtype=fnp.int32),), """\
{ lambda ; a:i32[2]. let
    b:f32[2] = convert_element_type[new_dtype=f32 weak_type=True] a
    c:f32[2] = add b 1.5:f32[]
  in (c,) }"""),
}


@pytest.mark.parametrize("name", sorted(GOLDEN))
def test_golden_ir(name):
    f, args, expected = GOLDEN[name]
    assert str(fg.make_jaxpr(f)(*args)) == expected


def test_closure_over_array_is_a_constvar():
    c = fnp.arange(4.0)
    jaxpr = fg.make_jaxpr(lambda x: x * c)(fnp.zeros(4))
    assert str(jaxpr) == "{ lambda a:f32[4]; b:f32[4]. let c:f32[4] = mul b a in (c,) }"
    np.testing.assert_array_equal(np.asarray(jaxpr.consts[0]), np.arange(4.0))


def test_eval_jaxpr_retraces_to_the_same_program():
    f = lambda x, y: fnp.tanh(x @ y).sum(axis=0)
    args = (fnp.ones((2, 3)), fnp.ones((3, 4)))
    closed = fg.make_jaxpr(f)(*args)
    again = fg.make_jaxpr(lambda *a: fg.core.eval_jaxpr(closed.jaxpr, closed.consts, *a)[0])(*args)
    assert str(again) == str(closed)
    np.testing.assert_allclose(fg.core.eval_jaxpr(closed.jaxpr, closed.consts, *args)[0],
                               np.tanh(np.ones((2, 3)) @ np.ones((3, 4))).sum(0), rtol=1e-6)


def test_checker_rejects_wrong_types_and_undefined_vars():
    from funcgrad.lax import sin_p
    a = Var(ShapedArray((3,), np.dtype("float32")))
    wrong = Var(ShapedArray((4,), np.dtype("float32")))
    with pytest.raises(JaxprTypeError, match="sin"):
        typecheck_jaxpr(Jaxpr([], [a], [wrong], [Eqn(sin_p, [a], [wrong], {})]))
    b = Var(ShapedArray((3,), np.dtype("float32")))
    out = Var(ShapedArray((3,), np.dtype("float32")))
    with pytest.raises(JaxprTypeError, match="before it is defined"):
        typecheck_jaxpr(Jaxpr([], [a], [out], [Eqn(sin_p, [b], [out], {})]))


def test_multiple_output_equation_prints_all_outputs():
    from funcgrad import lax
    jaxpr = fg.make_jaxpr(lambda k, v: lax.sort((k, v), num_keys=1))(fnp.zeros(3), fnp.ones(3))
    eqn = jaxpr.eqns[-1]
    assert eqn.prim.multiple_results and len(eqn.outvars) == 2
    assert "c:f32[3] d:f32[3] = sort" in str(jaxpr)


# --- tracing errors ------------------------------------------------------------------------

def test_if_on_traced_value_names_the_line_and_suggests_cond():
    def f(x):
        if x.sum() > 0:  # the offending line
            return x
        return -x
    with pytest.raises(errors.ConcretizationTypeError) as info:
        fg.make_jaxpr(f)(fnp.ones(3))
    msg = str(info.value)
    assert "the offending line" in msg and "test_core.py" in msg
    assert "lax.cond" in msg and "static" in msg


@pytest.mark.parametrize("conv", [int, float, bool, lambda x: x.item()])
def test_concretization_of_scalars(conv):
    with pytest.raises(errors.ConcretizationTypeError):
        fg.make_jaxpr(lambda x: conv(x))(fnp.float32(1.0))


def test_define_by_run_under_eager_grad_allows_python_control_flow():
    def f(x):
        return x * 3.0 if x > 0.5 else x * x
    assert float(fg.grad(f)(1.0)) == 3.0
    assert float(fg.grad(f)(0.25)) == 0.5


def test_tracer_leak_is_a_clear_error():
    stash = []

    def f(x):
        stash.append(x)
        return x.sum()
    fg.make_jaxpr(f)(fnp.ones(2))
    with pytest.raises(errors.TracerLeakError, match="tracer leak"):
        stash[0] + 1.0
    with pytest.raises(errors.TracerLeakError):
        fg.make_jaxpr(lambda y: y + stash[0])(fnp.ones(2))


def test_finished_traces_are_not_kept_alive():
    refs = []

    def f(x):
        refs.append(weakref.ref(x._trace))
        return (x * x).sum()
    for _ in range(3):
        fg.grad(f)(fnp.ones(3))
    gc.collect()
    assert all(r() is None for r in refs)


# --- bad input -----------------------------------------------------------------------------

def test_matmul_shape_error_names_both_shapes_and_line():
    with pytest.raises(TypeError) as info:
        fnp.ones((3, 4)) @ fnp.ones((5, 6))
    msg = str(info.value)
    assert "3,4" in msg.replace(", ", ",") and "5,6" in msg.replace(", ", ",")
    assert "test_core.py" in msg


def test_broadcast_error_names_shapes():
    with pytest.raises(ValueError) as info:
        fnp.ones((2, 3)) + fnp.ones((4,))
    assert "(2, 3)" in str(info.value) and "(4,)" in str(info.value)


def test_out_of_range_axis():
    with pytest.raises(ValueError, match="axis"):
        fnp.ones((2, 3)).sum(axis=5)


def test_unsupported_dtype_is_a_funcgrad_error():
    with pytest.raises(TypeError, match="dtype"):
        fnp.asarray(np.array(["a", "b"]))


def test_mismatched_pytrees_name_the_first_differing_path():
    with pytest.raises(ValueError, match=r"\['b'\]"):
        fg.tree_util.tree_map(lambda a, b: a + b, {"a": 1, "b": (1, 2)}, {"a": 1, "b": [1, 2]})


def test_lax_dtype_mismatch_names_operation():
    with pytest.raises(TypeError, match="add"):
        fg.lax.add(fnp.ones(2), fnp.ones(2, dtype=fnp.int32))


# --- coverage of the rule tables ------------------------------------------------------------

def _all_primitives():
    import funcgrad
    prims = {}
    for mod in pkgutil.walk_packages(funcgrad.__path__, "funcgrad."):
        if ".backends.cuda" in mod.name:
            continue
        m = importlib.import_module(mod.name)
        for obj in vars(m).values():
            if isinstance(obj, Primitive):
                prims[obj.name] = obj
    return prims


# Primitives whose outputs carry no derivative by design, or are derivative-only helpers.
NOT_DIFFERENTIABLE = {"debug_print", "debug_callback", "nextafter", "while"}
# Primitives without operands are never batched (nothing can carry a batch axis).
NO_OPERANDS = {"iota"}


def test_rule_table_coverage():
    prims = _all_primitives()
    rows, missing = [], []
    for name, p in sorted(prims.items()):
        has = {"impl": p.impl_rule is not None, "abstract": p.abstract_rule is not None,
               "jvp": p in ad.jvp_rules, "transpose": p in ad.transpose_rules,
               "batch": p in batching.batch_rules}
        rows.append(f"{name:28s} " + " ".join(k for k, v in has.items() if v))
        needed = ["impl", "abstract"] + ([] if name in NO_OPERANDS else ["batch"])
        needed += [] if name in NOT_DIFFERENTIABLE else ["jvp"]
        missing += [f"{name}: {k}" for k in needed if not has[k]]
    print("\n".join(rows))
    assert len(prims) > 90
    assert not missing, missing
