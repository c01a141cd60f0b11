"""Tests for funcgrad.interpreters.partial_eval on hand-written jaxprs: the known/unknown
split, residuals, instantiation, literals, nested calls, effects and DCE."""

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from funcgrad import debug
from funcgrad.compiler import call
from funcgrad.core import (
    Array,
    ClosedJaxpr,
    Eqn,
    Jaxpr,
    Literal,
    ShapedArray,
    Var,
    eval_jaxpr,
    pp_jaxpr,
    typecheck_jaxpr,
)
from funcgrad.interpreters.partial_eval import dce_jaxpr, partial_eval_jaxpr
from funcgrad.lax import add_p, cos_p, exp_p, mul_p, sin_p

F3 = ShapedArray((3,), np.dtype(np.float32))


def var():
    return Var(F3)


def eqn(prim, ins, outs, **params):
    return Eqn(prim, ins, outs, params)


def lit(x):
    return Literal(np.float32(x), ShapedArray((), np.dtype(np.float32), True))


def sample_program():
    """{ lambda ; a b. let c = sin a; d = mul c b; e = cos a; f = add d e in (f, e) }"""
    a, b, c, d, e, f = (var() for _ in range(6))
    eqns = [eqn(sin_p, [a], [c]), eqn(mul_p, [c, b], [d]), eqn(cos_p, [a], [e]),
            eqn(add_p, [d, e], [f])]
    return ClosedJaxpr(Jaxpr([], [a, b], [f, e], eqns), [])


def values(*seeds):
    return [Array(np.random.default_rng(s).standard_normal(3).astype(np.float32))
            for s in seeds]


def run_split(closed, in_unknowns, instantiate, args):
    """Evaluate the known part, then the unknown part: (outputs in original order)."""
    known, unknown, out_unknowns, num_res = partial_eval_jaxpr(closed, in_unknowns, instantiate)
    typecheck_jaxpr(known.jaxpr)
    typecheck_jaxpr(unknown.jaxpr)
    k_args = [x for x, u in zip(args, in_unknowns) if not u]
    u_args = [x for x, u in zip(args, in_unknowns) if u]
    k_outs = eval_jaxpr(known.jaxpr, known.consts, *k_args)
    n_known = len(k_outs) - num_res
    residuals = k_outs[n_known:]
    u_outs = iter(eval_jaxpr(unknown.jaxpr, unknown.consts, *residuals, *u_args))
    k_iter = iter(k_outs[:n_known])
    return [next(u_outs) if u else next(k_iter) for u in out_unknowns], out_unknowns, num_res


def test_split_with_one_unknown_input():
    closed = sample_program()
    known, unknown, out_unknowns, num_res = partial_eval_jaxpr(closed, [False, True], False)
    assert out_unknowns == [True, False] and num_res == 2
    assert pp_jaxpr(known.jaxpr) == (
        "{ lambda ; a:f32[3]. let\n"
        "    b:f32[3] = sin a\n"
        "    c:f32[3] = cos a\n"
        "  in (c, b, c) }")  # the known output e, then the residuals c = sin a and e
    assert pp_jaxpr(unknown.jaxpr) == (
        "{ lambda ; a:f32[3] b:f32[3] c:f32[3]. let\n"
        "    d:f32[3] = mul a c\n"
        "    e:f32[3] = add d b\n"
        "  in (e,) }")  # residuals sin a and cos a, then the unknown input b


def test_split_reproduces_the_program():
    closed = sample_program()
    args = values(0, 1)
    want = eval_jaxpr(closed.jaxpr, [], *args)
    for unknowns in ([False, False], [False, True], [True, False], [True, True]):
        for inst in (False, True):
            got, out_unknowns, _ = run_split(closed, unknowns, inst, args)
            for g, w in zip(got, want):
                np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-6)
            if inst:
                assert out_unknowns == [True, True]


def test_everything_known_or_unknown():
    closed = sample_program()
    known, unknown, out_unknowns, num_res = partial_eval_jaxpr(closed, [False, False], False)
    assert out_unknowns == [False, False] and num_res == 0
    assert len(known.jaxpr.eqns) == 4 and unknown.jaxpr.eqns == []
    known, unknown, out_unknowns, num_res = partial_eval_jaxpr(closed, [True, True], False)
    assert out_unknowns == [True, True] and num_res == 0
    assert known.jaxpr.eqns == [] and len(unknown.jaxpr.eqns) == 4


def test_instantiate_turns_a_known_output_into_a_residual():
    closed = sample_program()
    known, unknown, out_unknowns, num_res = partial_eval_jaxpr(closed, [False, True],
                                                               [False, True])
    assert out_unknowns == [True, True] and num_res == 2
    assert unknown.jaxpr.outvars[1] is unknown.jaxpr.invars[1]  # e passes through


def test_literals_and_known_consts():
    a, b, c, d = var(), var(), var(), var()
    w = var()
    eqns = [eqn(mul_p, [w, lit(2.0)], [c]), eqn(mul_p, [c, a], [b]), eqn(exp_p, [b], [d])]
    closed = ClosedJaxpr(Jaxpr([w], [a], [d], eqns), [Array(np.ones(3, np.float32))])
    known, unknown, out_unknowns, num_res = partial_eval_jaxpr(closed, [True], False)
    assert num_res == 1 and len(known.jaxpr.eqns) == 1 and known.consts == closed.consts
    got, _, _ = run_split(closed, [True], False, values(3))
    want = eval_jaxpr(closed.jaxpr, closed.consts, *values(3))
    np.testing.assert_allclose(np.asarray(got[0]), np.asarray(want[0]), rtol=1e-6)


def test_a_nested_call_is_split_into_a_known_and_an_unknown_call():
    inner = sample_program()
    a, b, f, e = var(), var(), var(), var()
    params = dict(jaxpr=inner, name="inner", donated=(False, False), backend="cpu")
    closed = ClosedJaxpr(Jaxpr([], [a, b], [f, e], [eqn(call.jit_p, [a, b], [f, e], **params)]),
                         [])
    known, unknown, out_unknowns, num_res = partial_eval_jaxpr(closed, [False, True], False)
    assert out_unknowns == [True, False] and num_res == 2
    (k_eqn,), (u_eqn,) = known.jaxpr.eqns, unknown.jaxpr.eqns
    assert k_eqn.prim is call.jit_p and u_eqn.prim is call.jit_p
    assert [e.prim for e in k_eqn.params["jaxpr"].eqns] == [sin_p, cos_p]
    assert [e.prim for e in u_eqn.params["jaxpr"].eqns] == [mul_p, add_p]
    got, _, _ = run_split(closed, [False, True], False, values(4, 5))
    want = eval_jaxpr(inner.jaxpr, [], *values(4, 5))
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-6)


def test_effects_stay_with_their_inputs_and_survive_dce():
    a, b, c, token = var(), var(), var(), Var(ShapedArray((), np.dtype(np.bool_)))
    printer = eqn(debug.debug_print_p, [a], [token], fmt="{}", _tree=None, _static=())
    eqns = [printer, eqn(mul_p, [a, b], [c])]
    closed = ClosedJaxpr(Jaxpr([], [a, b], [c], eqns), [])
    known, unknown, _, _ = partial_eval_jaxpr(closed, [False, True], False)
    assert known.jaxpr.eqns == [printer]
    kept, _ = dce_jaxpr(known.jaxpr, [False] * len(known.jaxpr.outvars))
    assert kept.eqns == [printer]
    dropped, _ = dce_jaxpr(known.jaxpr, [False] * len(known.jaxpr.outvars), drop_effects=True)
    assert dropped.eqns == []


def test_dce_drops_unused_equations_and_inputs():
    closed = sample_program()
    jaxpr, used_inputs = dce_jaxpr(closed.jaxpr, [False, True])
    assert [e.prim for e in jaxpr.eqns] == [cos_p] and used_inputs == [True, False]
    assert len(jaxpr.invars) == 2
    pruned, _ = dce_jaxpr(closed.jaxpr, [False, True], prune_inputs=True)
    assert pruned.invars == [closed.jaxpr.invars[0]]
    typecheck_jaxpr(pruned)


@st.composite
def programs(draw):
    """Random straight-line programs over three inputs of sin/cos/exp/mul/add."""
    env = [var() for _ in range(3)]
    invars, eqns = list(env), []
    for _ in range(draw(st.integers(1, 8))):
        prim = draw(st.sampled_from([sin_p, cos_p, mul_p, add_p]))
        ins = [draw(st.sampled_from(env)) for _ in range(2 if prim in (mul_p, add_p) else 1)]
        out = var()
        eqns.append(eqn(prim, ins, [out]))
        env.append(out)
    outs = draw(st.lists(st.sampled_from(env), min_size=1, max_size=3))
    return ClosedJaxpr(Jaxpr([], invars, outs, eqns), [])


@given(programs(), st.lists(st.booleans(), min_size=3, max_size=3), st.booleans())
def test_split_of_random_programs(closed, unknowns, inst):
    args = values(6, 7, 8)
    want = eval_jaxpr(closed.jaxpr, [], *args)
    got, out_unknowns, _ = run_split(closed, unknowns, inst, args)
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-5)
    if not any(unknowns) and not inst:
        assert not any(out_unknowns)
