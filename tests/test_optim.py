"""Tests for funcgrad.optim: each optimizer against its update equations written out in NumPy
(optax 0.2.8's defaults), schedules against their formulas, masks, the recorded learning rate,
jit, and errors."""

import math

import numpy as np
import pytest

import funcgrad as fg
import funcgrad.numpy as fnp
from funcgrad import optim
from funcgrad.errors import FuncgradError, FuncgradTypeError, FuncgradValueError
from funcgrad.tree_util import tree_leaves, tree_map, tree_structure

STEPS = 5


def make_params(seed=0):
    rng = np.random.default_rng(seed)
    f = lambda *s: rng.normal(size=s).astype(np.float32)
    return {"layer0": {"w": f(3, 4), "b": f(4)}, "out": {"w": f(4, 2), "b": f(2)}}


def grads_at(step, params):
    """A deterministic gradient for each step (some entries exactly zero)."""
    rng = np.random.default_rng(100 + step)
    return tree_map(lambda p: (rng.normal(size=p.shape) * (rng.random(p.shape) > 0.1))
                    .astype(np.float32), params)


def run(opt, params, steps=STEPS, grads_fn=grads_at):
    """Runs `opt` for `steps` updates from NumPy params; returns params as NumPy."""
    params = tree_map(fnp.asarray, params)
    state = opt.init(params)
    for t in range(steps):
        grads = tree_map(fnp.asarray, grads_fn(t, params))
        updates, state = opt.update(grads, state, params)
        params = optim.apply_updates(params, updates)
    return tree_map(np.asarray, params), state


def run_reference(step_fn, params, steps=STEPS):
    """Runs a hand-written NumPy update `step_fn(t, p, g, slots) -> p` leaf by leaf."""
    params = tree_map(np.copy, params)
    slots = tree_map(lambda p: {}, params)
    for t in range(steps):
        grads = grads_at(t, tree_map(fnp.asarray, params))
        params = tree_map(lambda p, g, s, t=t: step_fn(t, p, g, s), params, grads, slots,
                          is_leaf=lambda x: isinstance(x, dict) and not x)
    return params


def assert_trees_close(got, want, rtol=2e-6, atol=2e-7):
    assert tree_structure(got) == tree_structure(want)
    for a, b in zip(tree_leaves(got), tree_leaves(want)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=rtol, atol=atol)


f32 = np.float32


# ---------------------------------------------------------------------------------------------
# Optimizers vs their equations


def sgd_ref(lr, momentum=None, nesterov=False):
    def step(t, p, g, s):
        if momentum is None:
            return p - f32(lr) * g
        u = s.get("u", np.zeros_like(p))
        u = g + f32(momentum) * u
        s["u"] = u
        d = g + f32(momentum) * u if nesterov else u
        return p + f32(-lr) * d
    return step


@pytest.mark.parametrize("momentum,nesterov", [(None, False), (0.9, False), (0.9, True)])
def test_sgd_matches_equations(momentum, nesterov):
    params = make_params()
    got, _ = run(optim.sgd(0.1, momentum, nesterov), params)
    assert_trees_close(got, run_reference(sgd_ref(0.1, momentum, nesterov), params))


def test_ema_momentum_convention_and_learning_rate_relation():
    # Needle's convention: u = b*u + (1-b)*g; p -= lr*u ...
    b, lr = 0.9, 0.5
    params = make_params()

    def needle(t, p, g, s):
        s["u"] = f32(b) * s.get("u", np.zeros_like(p)) + f32(1 - b) * g
        return p - f32(lr) * s["u"]

    got, _ = run(optim.chain(optim.ema(b, debias=False), optim.scale(-lr)), params)
    assert_trees_close(got, run_reference(needle, params))
    # ... takes the same steps as optax's trace convention with lr * (1 - b).
    same, _ = run(optim.sgd(lr * (1 - b), momentum=b), params)
    assert_trees_close(got, same, rtol=1e-5, atol=1e-6)


def test_ema_debiased():
    params = make_params()

    def ref(t, p, g, s):
        s["u"] = f32(0.1) * g + f32(0.9) * s.get("u", np.zeros_like(p))
        return p + s["u"] / (f32(1) - f32(0.9) ** f32(t + 1))

    got, state = run(optim.ema(0.9), params)
    assert_trees_close(got, run_reference(ref, params))
    assert int(state.count) == STEPS


def adam_ref(lr=1e-3, b1=0.9, b2=0.999, eps=1e-8, weight_decay=None, decay_mask=None):
    def step(t, p, g, s):
        m = f32(1 - b1) * g + f32(b1) * s.get("m", np.zeros_like(p))
        v = f32(1 - b2) * (g * g) + f32(b2) * s.get("v", np.zeros_like(p))
        s["m"], s["v"] = m, v
        m_hat = m / (f32(1) - f32(b1) ** f32(t + 1))
        v_hat = v / (f32(1) - f32(b2) ** f32(t + 1))
        u = m_hat / (np.sqrt(v_hat) + f32(eps))
        if weight_decay is not None and (decay_mask is None or decay_mask(p)):
            u = u + f32(weight_decay) * p
        return p + f32(-lr) * u
    return step


def test_adam_matches_equations():
    params = make_params()
    got, state = run(optim.adam(1e-3), params)
    assert_trees_close(got, run_reference(adam_ref(), params))
    adam_state = state[0]
    assert isinstance(adam_state, optim.ScaleByAdamState) and int(adam_state.count) == STEPS


def test_adamw_default_weight_decay_and_mask_by_path():
    params = make_params()
    got, _ = run(optim.adamw(1e-2), params)
    assert_trees_close(got, run_reference(adam_ref(1e-2, weight_decay=1e-4), params))
    # Decay only on the weights: leaves whose path ends in "w" (2-D here).
    got, _ = run(optim.adamw(1e-2, weight_decay=0.05, mask="**/w"), params)
    want = run_reference(adam_ref(1e-2, weight_decay=0.05, decay_mask=lambda p: p.ndim == 2),
                         params)
    assert_trees_close(got, want)
    nodecay, _ = run(optim.adam(1e-2), params)
    np.testing.assert_array_equal(got["out"]["b"], nodecay["out"]["b"])
    assert not np.array_equal(got["out"]["w"], nodecay["out"]["w"])


def test_rmsprop_matches_equations():
    params = make_params()

    def ref(t, p, g, s):
        s["nu"] = f32(0.1) * (g * g) + f32(0.9) * s.get("nu", np.zeros_like(p))
        return p + f32(-1e-2) * (g * (f32(1) / np.sqrt(s["nu"] + f32(1e-8))))

    got, _ = run(optim.rmsprop(1e-2), params)
    assert_trees_close(got, run_reference(ref, params), rtol=1e-5, atol=1e-6)


def test_rmsprop_centered_with_momentum():
    params = make_params()

    def ref(t, p, g, s):
        s["mu"] = f32(0.1) * g + f32(0.9) * s.get("mu", np.zeros_like(p))
        s["nu"] = f32(0.1) * (g * g) + f32(0.9) * s.get("nu", np.zeros_like(p))
        u = f32(-1e-2) * (g / np.sqrt(s["nu"] - s["mu"] ** 2 + f32(1e-8)))
        s["tr"] = u + f32(0.5) * s.get("tr", np.zeros_like(p))
        return p + s["tr"]

    got, _ = run(optim.rmsprop(1e-2, centered=True, momentum=0.5), params)
    assert_trees_close(got, run_reference(ref, params), rtol=1e-5, atol=1e-6)


def test_adagrad_matches_equations():
    params = make_params()

    def ref(t, p, g, s):
        s["sum"] = g * g + s.get("sum", np.full_like(p, 0.1))
        inv = np.where(s["sum"] > 0, f32(1) / np.sqrt(s["sum"] + f32(1e-7)), f32(0))
        return p + f32(-0.1) * (inv * g)

    got, _ = run(optim.adagrad(0.1), params)
    assert_trees_close(got, run_reference(ref, params), rtol=1e-5, atol=1e-6)


def test_lion_matches_equations():
    params = make_params()

    def ref(t, p, g, s):
        m = s.get("m", np.zeros_like(p))
        u = np.sign(f32(0.1) * g + f32(0.9) * m)
        s["m"] = f32(0.01) * g + f32(0.99) * m
        return p + f32(-1e-3) * (u + f32(1e-3) * p)

    got, _ = run(optim.lion(1e-3), params)
    assert_trees_close(got, run_reference(ref, params))


def test_lamb_matches_equations():
    params = make_params()
    adam_step = adam_ref(lr=-1.0, eps=1e-6)  # p + 1.0 * adam_update

    def ref(t, p, g, s):
        u = adam_step(t, p, g, s) - p
        p_norm, u_norm = np.sqrt(np.sum(p * p)), np.sqrt(np.sum(u * u))
        ratio = f32(1.0) if p_norm == 0 or u_norm == 0 else p_norm / u_norm
        return p + f32(-1e-2) * (u * ratio)

    got, _ = run(optim.lamb(1e-2), params)
    assert_trees_close(got, run_reference(ref, params), rtol=1e-5, atol=1e-6)


def test_coupled_l2_and_clipping():
    params = make_params()

    def ref(t, p, g, s):
        g = np.clip(g + f32(0.01) * p, -0.5, 0.5)
        return p - f32(0.1) * g

    opt = optim.chain(optim.add_decayed_weights(0.01), optim.clip(0.5), optim.sgd(0.1))
    got, _ = run(opt, params)
    assert_trees_close(got, run_reference(ref, params))


def test_clip_by_global_norm():
    grads = {"a": fnp.asarray(np.array([3.0, 0.0], f32)), "b": fnp.asarray(np.array([4.0], f32))}
    opt = optim.clip_by_global_norm(1.0)
    clipped, _ = opt.update(grads, opt.init(grads))
    np.testing.assert_allclose(np.asarray(clipped["a"]), [0.6, 0.0], rtol=1e-6)
    np.testing.assert_allclose(float(optim.global_norm(clipped)), 1.0, rtol=1e-6)
    same, _ = optim.clip_by_global_norm(10.0).update(grads, optim.EmptyState())
    np.testing.assert_array_equal(np.asarray(same["b"]), [4.0])


def test_apply_updates_keeps_parameter_dtype():
    params = {"w": fnp.ones(3, dtype=fnp.bfloat16) if hasattr(fnp, "bfloat16")
              else fnp.ones(3, dtype=fnp.float16)}
    out = optim.apply_updates(params, {"w": fnp.full(3, 0.5)})
    assert out["w"].dtype == params["w"].dtype
    np.testing.assert_allclose(np.asarray(out["w"], np.float32), 1.5)


# ---------------------------------------------------------------------------------------------
# Schedules


def test_schedules_match_formulas():
    counts = [0, 1, 5, 10, 17, 30, 100]
    cases = [
        (optim.constant_schedule(0.3), lambda c: 0.3),
        (optim.exponential_decay(0.1, 10, 0.5), lambda c: 0.1 * 0.5 ** (c / 10)),
        (optim.exponential_decay(0.1, 10, 0.5, transition_begin=5, staircase=True,
                                 end_value=0.02),
         lambda c: max(0.1 * 0.5 ** math.floor(max(c - 5, 0) / 10), 0.02)),
        (optim.cosine_decay_schedule(1.0, 20, alpha=0.1),
         lambda c: 0.9 * 0.5 * (1 + math.cos(math.pi * min(c, 20) / 20)) + 0.1),
        (optim.linear_schedule(1.0, 0.2, 10, transition_begin=2),
         lambda c: 1.0 + (0.2 - 1.0) * min(max(c - 2, 0), 10) / 10),
        (optim.warmup_cosine_decay_schedule(0.0, 1.0, 10, 30, end_value=0.1),
         lambda c: c / 10 if c < 10 else
         0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(c - 10, 20) / 20))),
        (optim.piecewise_constant_schedule(1.0, {5: 0.5, 17: 0.1}),
         lambda c: 1.0 * (0.5 if c >= 5 else 1) * (0.1 if c >= 17 else 1)),
        (optim.join_schedules([optim.constant_schedule(1.0), optim.linear_schedule(1.0, 0.0, 10)],
                              [5]),
         lambda c: 1.0 if c < 5 else 1.0 - min(c - 5, 10) / 10),
    ]
    for schedule, formula in cases:
        for c in counts:
            want = formula(c)
            for count in (c, fnp.asarray(np.int32(c))):
                np.testing.assert_allclose(float(schedule(count)), want, rtol=1e-6, atol=1e-7)


def test_schedule_drives_the_learning_rate_and_current_lr():
    schedule = optim.exponential_decay(0.1, 2, 0.5)
    params = make_params()
    lrs = []

    def ref(t, p, g, s):
        lrs.append(float(schedule(t)))
        return p - f32(schedule(t)) * g

    opt = optim.sgd(schedule)
    state = opt.init(tree_map(fnp.asarray, params))
    assert float(optim.current_lr(state)) == pytest.approx(0.1)
    got, state = run(opt, params)
    assert_trees_close(got, run_reference(ref, params))
    # After STEPS updates the state records the rate of the last one.
    assert float(optim.current_lr(state)) == pytest.approx(float(schedule(STEPS - 1)), rel=1e-6)
    assert float(optim.current_lr(run(optim.adam(3e-4), params)[1])) == pytest.approx(3e-4)


def test_current_lr_without_learning_rate_is_an_error():
    with pytest.raises(FuncgradValueError, match="no learning rate"):
        optim.current_lr(optim.scale_by_adam().init(make_params()))


def test_non_scalar_schedule_is_a_clear_error():
    def bad(count):
        return fnp.ones(3) * 0.1

    opt = optim.adam(bad)
    with pytest.raises(FuncgradValueError, match=r"schedule bad returned an array of shape"):
        params = tree_map(fnp.asarray, make_params())
        state = opt.init(params)
        opt.update(params, state, params)


# ---------------------------------------------------------------------------------------------
# Masks


@pytest.mark.parametrize("pattern,selected", [
    ("**/w", {"layer0/w", "out/w"}),
    ("layer0/*", {"layer0/w", "layer0/b"}),
    ("*/b", {"layer0/b", "out/b"}),
    ("**", {"layer0/w", "layer0/b", "out/w", "out/b"}),
    (["out/**", "layer0/w"], {"out/w", "out/b", "layer0/w"}),
    ("w", set()),
])
def test_path_mask_globs(pattern, selected):
    mask = optim.path_mask(pattern)(make_params())
    got = {f"{a}/{b}" for a, sub in mask.items() for b, m in sub.items() if m}
    assert got == selected


def test_glob_double_star_matches_zero_segments():
    assert optim.path_mask("**/w")({"w": 1, "x": {"w": 2, "v": 3}}) == {
        "w": True, "x": {"v": False, "w": True}}


@pytest.mark.parametrize("kind", ["callable", "tree", "glob"])
def test_masked_forms_agree(kind):
    params = make_params()
    tree = {"layer0": {"w": True, "b": False}, "out": {"w": True, "b": False}}
    mask = {"callable": lambda p: tree_map(lambda x: x.ndim == 2, p), "tree": tree,
            "glob": "**/w"}[kind]
    got, state = run(optim.chain(optim.masked(optim.scale_by_adam(), mask), optim.scale(-0.1)),
                     params)
    inner = state[0].inner_state
    assert isinstance(inner.mu["out"]["b"], optim.MaskedNode)
    # Masked-out leaves get the raw gradient (scaled), masked-in leaves Adam's update.
    want_b = run_reference(lambda t, p, g, s: p - f32(0.1) * g, params)
    np.testing.assert_allclose(got["out"]["b"], want_b["out"]["b"], rtol=1e-6)
    adam_only, _ = run(optim.chain(optim.scale_by_adam(), optim.scale(-0.1)), params)
    np.testing.assert_allclose(got["layer0"]["w"], adam_only["layer0"]["w"], rtol=1e-6)


def test_mask_with_wrong_structure_names_the_path():
    params = tree_map(fnp.asarray, make_params())
    opt = optim.masked(optim.scale(2.0), {"layer0": {"w": True}, "out": {"w": True, "b": True}})
    with pytest.raises(FuncgradValueError, match=r"mask.*\['layer0'\]"):
        opt.init(params)


# ---------------------------------------------------------------------------------------------
# jit, structure errors, protocol


def test_update_under_jit_equals_eager():
    opt = optim.adamw(optim.cosine_decay_schedule(1e-2, 10), weight_decay=0.01, mask="**/w")
    params = tree_map(fnp.asarray, make_params())

    def step(params, state, grads):
        updates, state = opt.update(grads, state, params)
        return optim.apply_updates(params, updates), state

    jitted = fg.jit(step, donate_argnums=(0, 1))
    p_e, s_e = params, opt.init(params)
    p_j, s_j = tree_map(lambda p: fnp.asarray(np.array(p)), params), opt.init(params)
    for t in range(STEPS):
        grads = tree_map(fnp.asarray, grads_at(t, params))
        p_e, s_e = step(p_e, s_e, grads)
        p_j, s_j = jitted(p_j, s_j, grads)
    assert jitted.trace_count == 1
    assert_trees_close(p_j, p_e, rtol=1e-6, atol=1e-7)
    assert float(optim.current_lr(s_j)) == pytest.approx(float(optim.current_lr(s_e)))
    assert tree_structure(s_j) == tree_structure(s_e)


def test_current_lr_inside_jit():
    opt = optim.sgd(optim.linear_schedule(1.0, 0.0, 4))
    params = {"w": fnp.ones(2)}
    state = opt.init(params)
    lr_of = fg.jit(lambda s: optim.current_lr(s) * 2)
    assert float(lr_of(state)) == 2.0


def test_mismatched_grads_name_the_first_differing_path():
    opt = optim.adam(1e-3)
    params = tree_map(fnp.asarray, make_params())
    state = opt.init(params)
    grads = {"layer0": {"w": params["layer0"]["w"]}, "out": params["out"]}
    with pytest.raises(FuncgradValueError, match=r"\['layer0'\]") as info:
        opt.update(grads, state, params)
    assert "structure" in str(info.value)
    with pytest.raises(FuncgradValueError, match=r"\['out'\]"):
        optim.apply_updates(params, {"layer0": params["layer0"], "out": [1.0, 2.0]})


def test_sgd_mismatch_under_jit_names_the_path():
    opt = optim.sgd(0.1, momentum=0.9)
    params = {"a": fnp.ones(2), "b": fnp.ones(3)}
    state = opt.init(params)
    step = fg.jit(lambda g, s: opt.update(g, s)[0])
    with pytest.raises(FuncgradValueError, match=r"\['b'\]"):
        step({"a": fnp.ones(2), "c": fnp.ones(3)}, state)


def test_chain_rejects_factories_and_bad_state():
    with pytest.raises(FuncgradTypeError, match="scale_by_adam\\(\\)"):
        optim.chain(optim.scale_by_adam)
    opt = optim.chain(optim.scale(1.0), optim.scale(2.0))
    with pytest.raises(FuncgradValueError, match="2 chained"):
        opt.update({"w": fnp.ones(1)}, (optim.EmptyState(),))


def test_weight_decay_without_params_is_an_error():
    opt = optim.adamw(1e-3)
    params = {"w": fnp.ones(2)}
    with pytest.raises(FuncgradError, match="needs the parameters"):
        opt.update(params, opt.init(params))


def test_states_are_namedtuples_and_int32_counts():
    params = tree_map(fnp.asarray, make_params())
    for opt in (optim.sgd(0.1, 0.9), optim.adam(1e-3), optim.adamw(1e-3, mask="**/w"),
                optim.rmsprop(1e-3), optim.adagrad(1e-3), optim.lion(1e-4), optim.lamb(1e-3)):
        state = opt.init(params)
        assert isinstance(state, tuple)
        for s in state:
            assert hasattr(type(s), "_fields"), type(s)
        counts = [s.count for s in state if "count" in s._fields]
        assert counts and all(c.dtype == np.int32 for c in counts)
