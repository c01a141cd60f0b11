"""funcgrad.ad_checkpoint: every policy decides what the backward pass of a checkpointed block
reads from the forward pass and what it computes again (counted in the traced program of the
gradient), checkpoint_name, print_saved_residuals, and the function vjp returns as a pytree.
(Each policy's residuals against JAX's are in test_jax_api_golden.py.)"""

import collections
import functools

import numpy as np
import pytest

import funcgrad as fg
import funcgrad.numpy as fnp
from funcgrad import errors, lax
from funcgrad.ad_checkpoint import (
    Offloadable,
    Recompute,
    checkpoint_name,
    print_saved_residuals,
    saved_residuals,
)
from funcgrad.test_util import check_grads
from funcgrad.tree_util import Partial, tree_leaves

P = fg.checkpoint_policies


def block(x, w):
    h = checkpoint_name(fnp.tanh(x @ w), "h")
    return fnp.sum(fnp.sin(h * 2.0) @ w.T)


def _args(seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((2, 3)).astype(np.float32), \
        rng.standard_normal((3, 3)).astype(np.float32)


def top_level_counts(policy):
    """How many of each primitive the traced gradient program holds outside the forward
    `checkpoint` call: the forward of saved values plus what the backward computes."""
    x, w = _args()
    ck = fg.checkpoint(block, policy=policy)
    eqns = fg.make_jaxpr(fg.grad(ck, argnums=1))(x, w).eqns
    return collections.Counter(e.prim.name for e in eqns)


def test_policies_control_what_the_backward_computes_again():
    # Without a policy the forward is one `checkpoint` call and the backward recomputes
    # x @ w, tanh and sin (the second product's transpose reads sin): 1 recomputed product
    # plus the 3 products of the transposes.
    none = top_level_counts(None)
    assert none == top_level_counts(P.nothing_saveable)
    assert (none["checkpoint"], none["dot_general"], none["tanh"], none["sin"]) == (1, 4, 1, 1)
    # Saving everything the backward reads: the forward runs inline (2 products), nothing is
    # computed again.
    every = top_level_counts(P.everything_saveable)
    assert (every["checkpoint"], every["dot_general"], every["tanh"], every["sin"]) == \
        (0, 5, 1, 1)
    # Saving the products: tanh and sin are computed again, no product is.
    dots = top_level_counts(P.dots_saveable)
    assert (dots["dot_general"], dots["tanh"], dots["sin"]) == (5, 2, 2)
    # Saving h = tanh(x @ w): sin is recomputed from h, but tanh's derivative reads tanh's own
    # output, which is not saved, so x @ w and tanh are recomputed too (as in JAX).
    names = top_level_counts(P.save_only_these_names("h"))
    assert (names["dot_general"], names["tanh"], names["sin"], names["name"]) == (6, 2, 2, 1)
    assert top_level_counts(P.save_any_names_but_these("h")) == none
    assert top_level_counts(P.save_any_names_but_these("zz")) == names
    assert top_level_counts(P.checkpoint_dots) == dots
    assert top_level_counts(P.dots_with_no_batch_dims_saveable) == dots
    assert top_level_counts(P.offload_dot_with_no_batch_dims("device", "pinned_host")) == dots
    assert top_level_counts(P.save_anything_except_these_names("h")) == every


def test_every_policy_gives_the_plain_gradient():
    x, w = _args()
    want = fg.grad(block, (0, 1))(x, w)
    both = P.save_from_both_policies(P.dots_saveable, P.save_only_these_names("h"))
    offload = P.save_and_offload_only_these_names(
        names_which_can_be_saved=["h"], names_which_can_be_offloaded=[],
        offload_src="device", offload_dst="pinned_host")
    for policy in [None, P.everything_saveable, P.nothing_saveable, P.dots_saveable,
                   P.dots_with_no_batch_dims_saveable, P.save_only_these_names("h"),
                   P.save_any_names_but_these("h"), both, offload,
                   P.offload_dot_with_no_batch_dims("device", "pinned_host")]:
        ck = fg.checkpoint(block, policy=policy)
        for jitted in (False, True):
            g = (fg.jit if jitted else lambda f: f)(fg.grad(ck, (0, 1)))(x, w)
            for a, b in zip(g, want):
                np.testing.assert_allclose(a, b, rtol=2e-5, atol=2e-6)
    with fg.enable_x64(True):
        x64, w64 = (np.asarray(a, np.float64) for a in _args(3))
        check_grads(fg.checkpoint(block, policy=P.dots_saveable), (x64, w64), order=2)
        check_grads(fg.checkpoint(block, policy=P.save_only_these_names("h")), (x64, w64),
                    order=1)


def test_saved_values_are_computed_once_in_the_forward():
    x, w = _args()
    named = lambda x, w: fnp.sum(fnp.sin(checkpoint_name(x @ w, "xw")))  # noqa: E731
    calls = [0]
    impl = lax.dot_general_p.impl_rule

    def counted(*args, **params):
        calls[0] += 1
        return impl(*args, **params)
    lax.dot_general_p.impl_rule = counted
    try:
        fg.grad(fg.checkpoint(named, policy=P.save_only_these_names("xw")), 1)(x, w)
        assert calls[0] == 2  # the forward's and the transpose's; the backward reads xw
        calls[0] = 0
        fg.grad(fg.checkpoint(named), 1)(x, w)
        assert calls[0] == 3  # and once more, computing xw again
    finally:
        lax.dot_general_p.impl_rule = impl


def test_policy_decisions_and_errors():
    x, w = _args()

    def decide(prim, *avals, **params):
        return Offloadable("device", "pinned_host") if prim.name == "tanh" else Recompute
    got = saved_residuals(fg.checkpoint(block, policy=decide), x, w)
    assert [d.split(" from")[0] for _, d in got] == ["from the argument x",
                                                       "from the argument w",
                                                       "output of tanh"]
    with pytest.raises(errors.FuncgradTypeError, match="returned 'yes'"):
        fg.grad(fg.checkpoint(block, policy=lambda *a, **k: "yes"), 1)(x, w)
    with pytest.raises(errors.FuncgradValueError, match="should not intersect"):
        P.save_and_offload_only_these_names(names_which_can_be_saved=["a"],
                                            names_which_can_be_offloaded=["a"],
                                            offload_src="device", offload_dst="pinned_host")
    with pytest.raises(errors.FuncgradValueError, match="should be a boolean"):
        fg.grad(fg.checkpoint(block, policy=P.save_from_both_policies(
            P.dots_saveable, lambda *a, **k: Recompute)), 1)(x, w)


def test_checkpoint_name_is_the_identity_everywhere():
    x = fnp.arange(3.0)
    tree = checkpoint_name({"a": x, "b": (x * 2,)}, "t")
    np.testing.assert_allclose(tree["b"][0], 2 * x)
    assert fg.grad(lambda v: checkpoint_name(v * v, "sq").sum())(x).tolist() == [0, 2, 4]
    np.testing.assert_allclose(fg.vmap(lambda v: checkpoint_name(v, "n") + 1)(x), x + 1)
    f = fg.jit(lambda v: fnp.sin(checkpoint_name(v, "n")))
    assert "name[name=n]" in str(fg.make_jaxpr(f)(x))
    assert "name" not in f.lower(x).as_text()  # the compiler drops it
    np.testing.assert_allclose(f(x), np.sin(x), rtol=1e-6)


def test_print_saved_residuals(capsys):
    x, w = _args()
    print_saved_residuals(fg.checkpoint(block, policy=P.dots_saveable), x, w)
    lines = capsys.readouterr().out.splitlines()
    assert lines[:2] == ["f32[2,3] from the argument x", "f32[3,3] from the argument w"]
    assert lines[2].startswith("f32[2,3] output of dot_general from ") and \
        lines[2].endswith("(block)")
    print_saved_residuals(lambda p: fnp.sin(p["a"]).sum(), {"a": fnp.ones(2)})
    out = capsys.readouterr().out
    assert out.startswith(f"f32[2] output of cos from {__file__}:") and \
        out.endswith(" (<lambda>)\n")


def test_the_vjp_function_is_a_pytree():
    x, w = _args()
    f = lambda x, w: fnp.sum(fnp.tanh(x @ w))  # noqa: E731
    out, pullback = fg.vjp(f, x, w)
    assert isinstance(pullback, Partial)
    assert sorted(leaf.shape for leaf in tree_leaves(pullback)) == [(2, 3), (2, 3), (2, 3),
                                                                   (3, 3)]
    want = pullback(1.0)
    out2, pullback2 = fg.jit(functools.partial(fg.vjp, f))(x, w)  # returned from jit
    np.testing.assert_allclose(out2, out, rtol=1e-6)
    apply = fg.jit(lambda pb, ct: pb(ct))  # passed into jit
    for pb in (pullback, pullback2):
        for got, ref in zip(apply(pb, 1.0), want):
            np.testing.assert_allclose(got, ref, rtol=1e-5)
    apply(pullback, 2.0)
    assert apply.trace_count == 2  # one trace per pullback, reused for new cotangents
    jaxpr = fg.make_jaxpr(lambda x, w: fg.vjp(f, x, w))(x, w)
    assert len(jaxpr.jaxpr.outvars) == 1 + len(tree_leaves(pullback))
    leaves, tree = fg.tree_util.tree_flatten(pullback)
    rebuilt = tree.unflatten([leaf * 1 for leaf in leaves])
    for got, ref in zip(rebuilt(1.0), want):
        np.testing.assert_allclose(got, ref, rtol=1e-6)
    with pytest.raises(errors.FuncgradTypeError, match="structure"):
        pullback((1.0, 2.0))


def test_under_jit_the_recomputation_stays_unless_prevent_cse_is_off():
    x, w = _args()
    f = lambda x, w: fnp.sum(fnp.sin(fnp.tanh(x @ w)) * 2)  # noqa: E731

    def compiled(policy, prevent_cse=True):
        ck = fg.checkpoint(f, policy=policy, prevent_cse=prevent_cse)
        text = fg.jit(fg.value_and_grad(ck, 1)).lower(x, w).as_text()
        return text.count(" tanh "), text.count("dot_general")
    assert compiled(None) == (2, 3)  # forward, then x @ w and tanh again in the backward
    assert compiled(P.dots_saveable) == (2, 2)  # the product is read, tanh recomputed
    assert compiled(P.everything_saveable) == (1, 2)
    assert compiled(None, prevent_cse=False) == (1, 2)  # the compiler merges them (CSE)
    plain = fg.jit(fg.value_and_grad(f, 1))(x, w)
    for policy in (None, P.dots_saveable):
        got = fg.jit(fg.value_and_grad(fg.checkpoint(f, policy=policy), 1))(x, w)
        np.testing.assert_allclose(got[1], plain[1], rtol=1e-5)
