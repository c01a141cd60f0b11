"""The optax-compatible parts of funcgrad.optim beyond the recorded golden runs: jitted steps
equal eager ones (wrappers with lax.cond / while_loop / scan inside: line searches, L-BFGS,
MultiSteps, apply_if_finite, inject_hyperparams, partition, muon, ...), the derivatives of the
losses and projections (`check_grads` in float64), batching against a loop, and the errors a
user gets."""

import functools

import numpy as np
import optax_cases
import pytest

import funcgrad as fg
import funcgrad.numpy as fnp
from funcgrad import optim, random
from funcgrad.errors import FuncgradError, FuncgradValueError
from funcgrad.test_util import check_grads
from funcgrad.tree_util import tree_leaves, tree_map

FG = optax_cases.Frameworks(optax=optim, jnp=fnp, jax=fg)


def loss(p):
    return optax_cases.loss(FG, p)


def _params():
    return optax_cases.params(FG)


def _close(a, b, rtol=1e-5, atol=1e-6):
    for x, y in zip(tree_leaves(a), tree_leaves(b)):
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=rtol, atol=atol)


# ---------------------------------------------------------------------------------------------
# jit against eager


def _with_value(value, grads, fn):
    return {"value": value}


def _line_search_args(value, grads, fn):
    return {"value": value, "grad": grads, "value_fn": fn}


def _nan_b(grads, t):
    return {**grads, "b": fnp.where(t == 1, fnp.nan, 1.0) * grads["b"]}


JIT_CASES = {
    "adafactor": (lambda: optim.adafactor(0.05, min_dim_size_to_factor=2), None, None),
    "novograd": (lambda: optim.novograd(0.05), None, None),
    "lbfgs": (lambda: optim.lbfgs(), _line_search_args, None),
    "backtracking": (lambda: optim.chain(optim.sgd(1.0),
                                         optim.scale_by_backtracking_linesearch(10)),
                     _line_search_args, None),
    "multi_steps": (lambda: optim.MultiSteps(optim.adam(0.1), 2,
                                             should_skip_update_fn=optim.skip_not_finite
                                             ).gradient_transformation(), None, _nan_b),
    "apply_if_finite": (lambda: optim.apply_if_finite(optim.adam(0.1), 2), None, _nan_b),
    "inject_hyperparams": (lambda: optim.inject_hyperparams(optim.adamw)(
        learning_rate=optim.linear_schedule(0.1, 0.0, 4), weight_decay=0.01), None, None),
    "partition": (lambda: optim.partition({"a": optim.adam(0.1), "s": optim.sgd(0.1)},
                                          {"w": "a", "b": "s"}), None, None),
    "conditionally_mask": (lambda: optim.conditionally_mask(optim.adam(0.1),
                                                            lambda step: step % 2 == 0),
                           None, None),
    "muon": (lambda: optim.contrib.muon(0.05), None, None),
    "schedule_free_adamw": (lambda: optim.contrib.schedule_free_adamw(0.05), None, None),
    "sam": (lambda: optim.contrib.sam(optim.sgd(0.1), optim.sgd(0.05)), None, None),
    "reduce_on_plateau": (lambda: optim.chain(optim.sgd(0.01), optim.contrib.reduce_on_plateau(
        patience=1, rtol=0.5)), _with_value, None),
    "momo": (lambda: optim.contrib.momo(0.5), _with_value, None),
    "galore": (lambda: optim.contrib.galore(0.05, rank=2, update_proj_gap=2), None, None),
    "zero_nans_radam": (lambda: optim.chain(optim.zero_nans(), optim.radam(0.05)), None, None),
}


def _step_fn(opt, extra_fn, alter):
    def step(p, state, t):
        value, grads = fg.value_and_grad(loss)(p)
        if alter is not None:
            grads = alter(grads, t)
        kwargs = extra_fn(value, grads, loss) if extra_fn else {}
        updates, state = opt.update(grads, state, p, **kwargs)
        return optim.apply_updates(p, updates), state
    return step


@pytest.mark.parametrize("name", sorted(JIT_CASES))
def test_jitted_steps_equal_eager_steps(name):
    make, extra_fn, alter = JIT_CASES[name]
    opt = make()
    step = _step_fn(opt, extra_fn, alter)
    jitted = fg.jit(step)
    p_eager = p_jit = _params()
    s_eager = s_jit = opt.init(p_eager)
    for t in range(4):
        t = fnp.asarray(t)
        p_eager, s_eager = step(p_eager, s_eager, t)
        p_jit, s_jit = jitted(p_jit, s_jit, t)
    _close(p_jit, p_eager, rtol=2e-5, atol=2e-6)
    assert all(np.isfinite(np.asarray(x)).all() for x in tree_leaves(p_jit))


def test_inject_hyperparams_changes_take_effect_under_jit():
    opt = optim.inject_hyperparams(optim.sgd)(learning_rate=0.1)
    step = fg.jit(_step_fn(opt, None, None))
    p = _params()
    state = opt.init(p)
    state.hyperparams["learning_rate"] = fnp.asarray(0.0)
    p_same, _ = step(p, state, fnp.asarray(0))
    _close(p_same, p)
    state.hyperparams["learning_rate"] = fnp.asarray(0.1)
    p_moved, _ = step(p, state, fnp.asarray(0))
    grads = fg.grad(loss)(p)
    _close(p_moved, tree_map(lambda x, g: x - 0.1 * g, p, grads))


def test_multi_steps_accumulates_the_mean_then_applies_once():
    p = _params()
    grads = [tree_map(lambda x, s=s: fnp.full_like(x, float(s)), p) for s in (1, 2, 3)]
    ms = optim.MultiSteps(optim.sgd(1.0), every_k_schedule=3)
    state = ms.init(p)
    outs = []
    for g in grads:
        u, state = ms.update(g, state, p)
        outs.append(u)
    for u in outs[:2]:
        assert all(np.all(np.asarray(x) == 0) for x in tree_leaves(u))
    _close(outs[2], tree_map(lambda x: -2.0 * fnp.ones_like(x), p))   # -lr * mean(1, 2, 3)
    assert bool(ms.has_updated(state)) and int(state.gradient_step) == 1


# ---------------------------------------------------------------------------------------------
# Derivatives of losses and projections (float64)

X = np.array([[0.3, -1.2, 2.0, 0.1], [1.5, 0.2, -0.4, -0.9]])
Y = np.array([[0.1, 0.6, 0.2, 0.1], [0.25, 0.25, 0.4, 0.1]])

LOSS_GRADS = {
    "hinge": lambda x, y: optim.losses.hinge_loss(x, 2 * y - 0.3),
    "focal": lambda x, y: optim.losses.sigmoid_focal_loss(x, y, alpha=0.3, gamma=1.5),
    "poly": lambda x, y: optim.losses.poly_loss_cross_entropy(x, y, epsilon=1.5),
    "kl": lambda x, y: optim.losses.kl_divergence(fg.nn.log_softmax(x), y),
    "kl_log_targets": lambda x, y: optim.losses.kl_divergence_with_log_targets(
        fg.nn.log_softmax(x), fnp.log(y)),
    "generalized_kl": lambda x, y: optim.losses.generalized_kl_divergence(x, y),
    "safe_softmax_ce": optim.losses.safe_softmax_cross_entropy,
    "cosine_distance": lambda x, y: optim.losses.cosine_distance(x, y + 0.5),
    "triplet": lambda x, y: optim.losses.triplet_margin_loss(x, y, -y, margin=3.0),
    "ranking": lambda x, y: optim.losses.ranking_softmax_loss(x, y),
    "dice": lambda x, y: optim.losses.dice_loss(x[None], y[None]),
    "ntxent": lambda x, y: optim.losses.ntxent(x, fnp.array([0, 0]), 0.5),
    "l2_ball": lambda x, y: optim.projections.projection_l2_ball(x * y, 0.5),
    "hyperplane": lambda x, y: optim.projections.projection_hyperplane(x, y, 1.0),
}


@pytest.mark.parametrize("name", sorted(LOSS_GRADS))
def test_loss_and_projection_derivatives(name):
    check_grads(LOSS_GRADS[name], (X, Y), order=1)


def test_ctc_loss_derivative():
    logits = np.random.default_rng(0).normal(size=(2, 5, 4))
    labels = fnp.array([[1, 2], [3, 3]])
    ctc = functools.partial(optim.losses.ctc_loss, logit_paddings=fnp.zeros((2, 5)),
                            labels=labels, label_paddings=fnp.zeros((2, 2)))
    check_grads(lambda x: ctc(x), (logits,), order=1)


def test_projection_simplex_derivative_and_batching():
    x = np.array([0.4, -0.3, 0.9, 0.2])
    check_grads(optim.projections.projection_simplex, (x,), order=1, modes=("fwd",))
    rows = fnp.asarray(np.random.default_rng(1).normal(size=(5, 4)).astype(np.float32))
    batched = fg.vmap(optim.projections.projection_simplex)(rows)
    looped = fnp.stack([optim.projections.projection_simplex(rows[i]) for i in range(5)])
    _close(batched, looped)
    np.testing.assert_allclose(np.asarray(batched).sum(1), 1.0, rtol=1e-6)
    assert (np.asarray(batched) >= 0).all()


def test_ctc_loss_batches_like_a_loop():
    rng = np.random.default_rng(2)
    logits = fnp.asarray(rng.normal(size=(3, 6, 5)).astype(np.float32))
    labels = fnp.array([[1, 2, 0], [4, 4, 1], [2, 0, 0]])
    label_pad = fnp.array([[0, 0, 1], [0, 0, 0], [0, 1, 1]], dtype=fnp.float32)
    whole = optim.ctc_loss(logits, fnp.zeros((3, 6)), labels, label_pad)
    each = [optim.ctc_loss(logits[i:i + 1], fnp.zeros((1, 6)), labels[i:i + 1],
                           label_pad[i:i + 1])[0] for i in range(3)]
    _close(whole, fnp.stack(each))


# ---------------------------------------------------------------------------------------------
# Errors


def test_partition_names_a_label_without_transform():
    opt = optim.partition({"adam": optim.adam(0.1)}, {"w": "adam", "b": "sgd"})
    with pytest.raises(FuncgradValueError, match="sgd"):
        opt.init(_params())


def test_line_search_needs_its_extra_arguments():
    opt = optim.lbfgs()
    state = opt.init(_params())
    grads = fg.grad(loss)(_params())
    with pytest.raises(TypeError, match="value"):
        opt.update(grads, state, _params())
    with pytest.raises(FuncgradError, match="unexpected keyword arguments"):
        opt.update(grads, state, _params(), value=loss(_params()), grad=grads, value_fn=loss,
                   nonsense=1.0)


def test_bad_arguments_raise_clear_errors():
    with pytest.raises(FuncgradValueError, match="memory_size"):
        optim.scale_by_lbfgs(memory_size=0)
    with pytest.raises(FuncgradValueError, match="factor"):
        optim.contrib.reduce_on_plateau(factor=2.0)
    with pytest.raises(FuncgradValueError, match="interpolate_type"):
        optim.piecewise_interpolate_schedule("quadratic", 1.0)
    with pytest.raises(FuncgradValueError, match="sync_period"):
        optim.lookahead(optim.sgd(0.1), sync_period=0, slow_step_size=0.5)
    with pytest.raises(FuncgradValueError, match="rank >= 2"):
        opt = optim.contrib.scale_by_muon(weight_dimension_numbers={
            "b": optim.contrib.MuonDimensionNumbers()})
        opt.update({"b": fnp.ones(3)}, opt.init({"b": fnp.ones(3)}))
    with pytest.raises(FuncgradValueError, match="batch"):
        optim.per_example_global_norm_clip({"a": fnp.ones((2, 3)), "b": fnp.ones((3,))}, 1.0)


def test_noise_transforms_are_reproducible_and_keyed():
    p = _params()
    grads = fg.grad(loss)(p)
    a = optim.noisy_sgd(0.1, key=random.PRNGKey(3))
    b = optim.noisy_sgd(0.1, key=3)
    ua, _ = a.update(grads, a.init(p), p)
    ub, _ = b.update(grads, b.init(p), p)
    _close(ua, ub)
    c = optim.noisy_sgd(0.1, key=4)
    uc, _ = c.update(grads, c.init(p), p)
    assert not np.allclose(np.asarray(uc["w"]), np.asarray(ua["w"]))


# ---------------------------------------------------------------------------------------------
# Checkpoints of the states


STATE_CASES = {
    "inject_hyperparams": lambda: optim.inject_hyperparams(optim.adam)(
        learning_rate=optim.exponential_decay(0.1, 3, 0.5)),
    "multi_steps": lambda: optim.MultiSteps(optim.adam(0.1), 2,
                                            should_skip_update_fn=optim.skip_not_finite),
    "named_chain": lambda: optim.named_chain(("clip", optim.clip(1.0)),
                                             ("adafactor", optim.adafactor(0.01))),
    "lbfgs_backtracking": lambda: optim.lbfgs(
        linesearch=optim.scale_by_backtracking_linesearch(5)),
    "muon": lambda: optim.contrib.muon(0.02),
    "schedule_free": lambda: optim.contrib.schedule_free_adamw(0.01),
}


@pytest.mark.parametrize("name", sorted(STATE_CASES))
def test_states_survive_a_checkpoint(name, tmp_path):
    from funcgrad import io
    opt = STATE_CASES[name]()
    p = _params()
    state = opt.init(p)
    grads = fg.grad(loss)(p)
    kwargs = {"value": loss(p), "grad": grads, "value_fn": loss} if "lbfgs" in name else {}
    _, state = opt.update(grads, state, p, **kwargs)
    io.save(tmp_path / "state", state)
    restored = io.load(tmp_path / "state")
    assert fg.tree_util.tree_structure(restored) == fg.tree_util.tree_structure(state)
    _close(opt.update(grads, restored, p, **kwargs)[0], opt.update(grads, state, p, **kwargs)[0])
