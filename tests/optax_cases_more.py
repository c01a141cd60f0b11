"""More cases for `optax_cases.CASES` (see its docstring): losses, projections, optax.contrib,
lookahead, linear algebra, utilities, microbatching and perturbations.

Imports numpy and `optax_cases` only.
"""

import numpy as np
from optax_cases import CASES, _array, case, loss, params, run, tree_a, tree_b

# ---------------------------------------------------------------------------------------------
# Losses: values and the gradient of their sum (w.r.t. the first argument)

LOGITS = _array(4, 5, seed=20) * 2
PROBS = np.exp(LOGITS) / np.exp(LOGITS).sum(-1, keepdims=True)
INT_LABELS = np.array([0, 3, 1, 4], np.int32)
ONE_HOT = np.eye(5, dtype=np.float32)[INT_LABELS]
SIGNS = np.where(_array(4, 5, seed=21) > 0, 1.0, -1.0).astype(np.float32)


def _loss_with_grad(m, fn, *args):
    args = [m.jnp.asarray(a) for a in args]
    value = fn(*args)
    grad = m.jax.grad(lambda x: m.jnp.sum(fn(x, *args[1:])))(args[0])
    return {"value": value, "grad": grad}


LOSSES = {
    "hinge": lambda l: (l.hinge_loss, LOGITS, SIGNS),
    "perceptron": lambda l: (l.perceptron_loss, LOGITS, SIGNS),
    "sparsemax": lambda l: (l.sparsemax_loss, LOGITS / 2, ONE_HOT),
    "safe_softmax_ce": lambda l: (l.safe_softmax_cross_entropy, LOGITS, PROBS),
    "multiclass_hinge": lambda l: (l.multiclass_hinge_loss, LOGITS, INT_LABELS),
    "multiclass_perceptron": lambda l: (l.multiclass_perceptron_loss, LOGITS, INT_LABELS),
    "multiclass_sparsemax": lambda l: (l.multiclass_sparsemax_loss, LOGITS, INT_LABELS),
    "poly": lambda l: (lambda x, y: l.poly_loss_cross_entropy(x, y, epsilon=1.5), LOGITS,
                       PROBS),
    "kl": lambda l: (l.kl_divergence, np.log(PROBS[::-1].copy()), ONE_HOT * 0.5 + 0.1),
    "kl_log_targets": lambda l: (l.kl_divergence_with_log_targets, np.log(PROBS),
                                 np.log(PROBS[::-1].copy())),
    "generalized_kl": lambda l: (l.generalized_kl_divergence, np.log(PROBS), PROBS * 2),
    "focal": lambda l: (l.sigmoid_focal_loss, LOGITS, ONE_HOT),
    "focal_alpha": lambda l: (lambda x, y: l.sigmoid_focal_loss(x, y, alpha=0.25, gamma=1.5),
                              LOGITS, ONE_HOT),
    "ranking": lambda l: (lambda x, y: l.ranking_softmax_loss(x, y, reduce_fn=None), LOGITS,
                          ONE_HOT + PROBS),
    "cosine_similarity": lambda l: (l.cosine_similarity, LOGITS, PROBS),
    "cosine_distance": lambda l: (lambda x, y: l.cosine_distance(x, y, epsilon=0.1, axis=0),
                                  LOGITS, PROBS),
    "triplet": lambda l: (lambda a, p: l.triplet_margin_loss(a, p, p[::-1] * 0.5, margin=2.0),
                          LOGITS, PROBS),
    "l2": lambda l: (l.l2_loss, LOGITS, PROBS),
    "huber": lambda l: (lambda x, y: l.huber_loss(x, y, delta=0.5), LOGITS, PROBS),
    "log_cosh": lambda l: (l.log_cosh, LOGITS, PROBS),
    "squared_error": lambda l: (l.squared_error, LOGITS, PROBS),
    "sigmoid_bce": lambda l: (l.sigmoid_binary_cross_entropy, LOGITS, ONE_HOT),
    "softmax_ce": lambda l: (l.softmax_cross_entropy, LOGITS, PROBS),
    "softmax_ce_int": lambda l: (l.softmax_cross_entropy_with_integer_labels, LOGITS,
                                 INT_LABELS),
    "dice": lambda l: (l.dice_loss, LOGITS.reshape(2, 2, 5), ONE_HOT.reshape(2, 2, 5)),
    "dice_tversky": lambda l: (lambda x, y: l.dice_loss(x, y, alpha=0.3, beta=0.7,
                                                        reduction="sum",
                                                        ignore_background=True),
                               LOGITS.reshape(2, 2, 5), ONE_HOT.reshape(2, 2, 5)),
    "generalized_dice": lambda l: (l.multiclass_generalized_dice_loss,
                                   LOGITS.reshape(2, 2, 5), ONE_HOT.reshape(2, 2, 5)),
    "binary_dice": lambda l: (l.binary_dice_loss, LOGITS, ONE_HOT),
}


def _loss_case(make):
    return lambda m: _loss_with_grad(m, *make(m.optax.losses))


for _name, _make in LOSSES.items():
    CASES["loss_" + _name] = _loss_case(_make)


@case
def loss_ntxent(m):
    emb = m.jnp.asarray(_array(6, 3, seed=22))
    labels = m.jnp.asarray(np.array([0, 1, 0, 2, 1, 2], np.int32))
    return {"value": m.optax.losses.ntxent(emb, labels, 0.5),
            "grad": m.jax.grad(lambda e: m.optax.losses.ntxent(e, labels))(emb)}


@case
def loss_ctc(m):
    logits = m.jnp.asarray(_array(2, 6, 4, seed=23))
    logit_pad = m.jnp.asarray(np.array([[0] * 6, [0] * 4 + [1] * 2], np.float32))
    labels = m.jnp.asarray(np.array([[1, 2, 2], [3, 1, 0]], np.int32))
    label_pad = m.jnp.asarray(np.array([[0, 0, 0], [0, 0, 1]], np.float32))
    loss, phi, emit = m.optax.losses.ctc_loss_with_forward_probs(logits, logit_pad, labels,
                                                                 label_pad)
    grad = m.jax.grad(lambda x: m.jnp.sum(m.optax.ctc_loss(x, logit_pad, labels, label_pad,
                                                           blank_id=0)))(logits)
    return {"loss": loss, "phi": phi, "emit": emit, "grad": grad}


@case
def loss_fenchel_young(m):
    jsp = m.jax.scipy.special
    fy = m.optax.losses.make_fenchel_young_loss(jsp.logsumexp)
    x = m.jnp.asarray(LOGITS)
    return {"value": fy(x, m.jnp.asarray(PROBS)),
            "grad": m.jax.grad(lambda s: m.jnp.sum(fy(s, m.jnp.asarray(PROBS))))(x)}


@case
def loss_where_and_masks(m):
    l, jnp = m.optax.losses, m.jnp
    x, p = jnp.asarray(LOGITS), jnp.asarray(PROBS)
    where = jnp.asarray(np.array([[True] * 4 + [False]] * 4))
    return {"kl": l.kl_divergence(jnp.log(p), p[::-1], where=where),
            "cos": l.cosine_similarity(x, p, where=where),
            "ranking_mean": l.ranking_softmax_loss(x, jnp.asarray(ONE_HOT), where=where),
            "poly": l.poly_loss_cross_entropy(x, p, where=where)}


# ---------------------------------------------------------------------------------------------
# Projections


@case
def projections(m):
    pr, a, b = m.optax.projections, tree_a(m), tree_b(m)
    x = m.jnp.asarray(np.array([0.3, -1.2, 2.5, 0.1], np.float32))
    return {"non_negative": pr.projection_non_negative(a),
            "box": pr.projection_box(x, -0.5, 1.0), "hypercube": pr.projection_hypercube(x, 2.0),
            "simplex": pr.projection_simplex(a), "simplex_scaled": pr.projection_simplex(x, 3.0),
            "l1_sphere": pr.projection_l1_sphere(a, 2.0), "l1_ball": pr.projection_l1_ball(a),
            "l1_ball_inside": pr.projection_l1_ball(x, 10.0),
            "l2_sphere": pr.projection_l2_sphere(a, 2.0), "l2_ball": pr.projection_l2_ball(a),
            "linf_ball": pr.projection_linf_ball(a, 1.5), "vector": pr.projection_vector(a, b),
            "hyperplane": pr.projection_hyperplane(a, b, 1.0),
            "halfspace": pr.projection_halfspace(a, b, -1.0),
            "simplex_grad": m.jax.grad(lambda v: m.jnp.sum(pr.projection_simplex(v) * v))(x)}


# ---------------------------------------------------------------------------------------------
# optax.contrib

CONTRIB = {
    "muon": lambda c: c.muon(0.05),
    "muon_options": lambda c: c.muon(0.05, ns_coeffs="dion", adaptive=True, nesterov=False,
                                     weight_decay=0.01, consistent_rms=0.2),
    "muon_spectral": lambda c: c.muon(0.05, preconditioning="spectral", ns_steps=3),
    "muon_aol": lambda c: c.muon(0.05, preconditioning="aol"),
    "muon_schatten": lambda c: c.muon(0.05, preconditioning="schatten"),
    "schedule_free_sgd": lambda c: c.schedule_free_sgd(0.1, warmup_steps=2, weight_decay=0.01),
    "schedule_free_adamw": lambda c: c.schedule_free_adamw(0.05, warmup_steps=3),
    "prodigy": lambda c: c.prodigy(),
    "prodigy_safeguard": lambda c: c.prodigy(0.5, safeguard_warmup=True, weight_decay=0.01),
    "dadapt_adamw": lambda c: c.dadapt_adamw(weight_decay=0.01),
    "cocob": lambda c: c.cocob(weight_decay=0.01),
    "dog": lambda c: c.dog(),
    "dog_distance": lambda c: c.dog(init_step=("distance", 0.1), weight_decay=0.01),
    "dog_lr": lambda c: c.dog(init_step=("learning_rate", 0.01)),
    "dowg": lambda c: c.dowg(),
    "ademamix": lambda c: c.ademamix(0.05, weight_decay=0.01),
    "ademamix_scheduled": lambda c: c.ademamix(0.05, b3=lambda t: 0.9 + 0.01 * t,
                                               alpha=lambda t: 1.0 + t),
    "simplified_ademamix": lambda c: c.simplified_ademamix(0.01, alpha=2.0),
    "adopt": lambda c: c.adopt(0.05),
    "adopt_nesterov": lambda c: c.adopt(0.05, nesterov=True, use_clipping=False),
    "acprop": lambda c: c.acprop(0.05),
    "madgrad": lambda c: c.madgrad(0.05, weight_decay=0.01),
    "galore": lambda c: c.galore(0.05, rank=2, update_proj_gap=3),
}


def _contrib_case(make):
    return lambda m: run(m, make(m.optax.contrib), steps=6)


for _name, _make in CONTRIB.items():
    CASES["contrib_" + _name] = _contrib_case(_make)


def _value(value, grads, p):
    return {"value": value}


@case
def contrib_with_values(m):
    c, o = m.optax.contrib, m.optax
    return {"momo": run(m, c.momo(0.5), extra_args=_value),
            "momo_adapt": run(m, c.momo(0.5, adapt_lower_bound=True, weight_decay=0.01),
                              extra_args=_value),
            "momo_adam": run(m, c.momo_adam(0.1), extra_args=_value),
            "momo_adam_adapt": run(m, c.momo_adam(0.1, adapt_lower_bound=True, lower_bound=1.0),
                                   extra_args=_value),
            "mechanize": run(m, c.mechanize(o.adam(0.1)), extra_args=_value),
            "plateau": run(m, o.chain(o.sgd(0.01), c.reduce_on_plateau(
                factor=0.5, patience=1, rtol=0.5, accumulation_size=2)), steps=8,
                extra_args=_value)}


@case
def contrib_sam(m):
    o, c = m.optax, m.optax.contrib
    adv = o.chain(c.normalize(), o.sgd(0.05))
    transparent = c.sam(o.sgd(0.1), adv, sync_period=3)
    grad_fn = lambda p, i: m.jax.grad(lambda q: loss(m, q))(p)  # noqa: E731
    opaque = c.sam(o.sgd(0.1), adv, sync_period=2, opaque_mode=True)
    return {"transparent": run(m, transparent, steps=6),
            "transparent_keep": run(m, c.sam(o.sgd(0.1), adv, reset_state=False), steps=5),
            "opaque": run(m, opaque, steps=3,
                          extra_args=lambda v, g, p: {"grad_fn": grad_fn})}


@case
def contrib_schedule_free_eval(m):
    c = m.optax.contrib
    opt = c.schedule_free(m.optax.sgd(0.1), learning_rate=0.1, b1=0.8)
    p = params(m)
    state = opt.init(p)
    for _ in range(4):
        grads = m.jax.grad(lambda q: loss(m, q))(p)
        updates, state = opt.update(grads, state, p)
        p = m.optax.apply_updates(p, updates)
    return {"params": p, "eval": c.schedule_free_eval_params(state, p),
            "weight_sum": state.weight_sum}


@case
def contrib_sophia(m):
    c = m.optax.contrib
    opt = c.sophia(0.05, update_interval=2,
                   hessian_diagonal_fn=c.hutchinson_estimator_diag_hessian(
                       m.jax.random.PRNGKey(7)))
    fn = lambda q: loss(m, q)  # noqa: E731
    return run(m, opt, steps=5, extra_args=lambda v, g, p: {"obj_fn": fn})


@case
def contrib_complex_and_privacy(m):
    c, o, jnp = m.optax.contrib, m.optax, m.jnp
    z = {"z": jnp.asarray(np.array([1 + 2j, -0.5 + 0.25j], np.complex64))}
    opt = c.split_real_and_imaginary(o.adam(0.1))
    state = opt.init(z)
    for _ in range(3):
        grads = m.jax.tree.map(lambda x: jnp.conj(x) * 0.5, z)
        updates, state = opt.update(grads, state, z)
        z = o.apply_updates(z, updates)
    per_example = {"a": jnp.asarray(_array(4, 3, seed=30)), "b": jnp.asarray(_array(4, 2, seed=31))}
    dp = c.dpsgd(0.1, l2_norm_clip=1.0, noise_multiplier=0.5, seed=2, momentum=0.9)
    dp_state = dp.init({"a": jnp.zeros(3), "b": jnp.zeros(2)})
    dp_updates, dp_state = dp.update(per_example, dp_state)
    dp_updates2, _ = dp.update(per_example, dp_state)
    return {"complex": [jnp.real(z["z"]), jnp.imag(z["z"])], "dp": dp_updates,
            "dp2": dp_updates2}


# ---------------------------------------------------------------------------------------------
# Lookahead, linear algebra, utilities, microbatching, perturbations


@case
def lookahead(m):
    o = m.optax
    out = {}
    for reset in (False, True):
        opt = o.lookahead(o.adam(0.1), sync_period=3, slow_step_size=0.5, reset_state=reset)
        p = o.LookaheadParams.init_synced(params(m))
        state = opt.init(p)
        for _ in range(7):
            grads = m.jax.grad(lambda q: loss(m, q))(p.fast)
            updates, state = opt.update(grads, state, p)
            p = o.apply_updates(p, updates)
        out[f"reset={reset}"] = {"fast": p.fast, "slow": p.slow}
    return out


@case
def linear_algebra(m):
    o, jnp = m.optax, m.jnp
    a = _array(4, 4, seed=40)
    spd = jnp.asarray(a @ a.T + 4 * np.eye(4, dtype=np.float32))
    eig, vec = o.power_iteration(spd, num_iters=200)
    tree_eig, _ = o.power_iteration(lambda v: {"x": spd @ v["x"]},
                                    v0={"x": jnp.ones(4)}, num_iters=200)
    root2, err2 = o.matrix_inverse_pth_root(spd, 2)
    root4, _ = o.matrix_inverse_pth_root(spd, 4, ridge_epsilon=1e-4)
    big_a = jnp.asarray(_array(6, 3, seed=41))
    b = jnp.asarray(_array(6, seed=42))
    return {"eig": eig, "vec": jnp.abs(vec), "tree_eig": tree_eig, "root2": root2,
            "err2": err2 < 1e-3, "root4": root4, "nnls": o.nnls(big_a, b, iters=200),
            "nnls_2d": o.nnls(big_a, jnp.stack([b, -b], axis=1), iters=50, L=20.0)}


@case
def utilities(m):
    o, jnp = m.optax, m.jnp
    x = jnp.asarray(np.array([1.0, -2.0, 0.5], np.float32))
    dist = o.multi_normal(jnp.asarray(np.array([0.5, -1.0], np.float32)),
                          jnp.asarray(np.array([0.0, -0.5], np.float32)))
    samples = dist.sample((3,), m.jax.random.PRNGKey(5))
    return {"scaled": m.jax.grad(lambda v: m.jnp.sum(o.scale_gradient(v, 0.25) ** 2))(x),
            "stopped": m.jax.grad(lambda v: m.jnp.sum(o.scale_gradient(v, 0.0) * v))(x),
            "same": m.jax.grad(lambda v: m.jnp.sum(o.scale_gradient(v, 1.0) * v))(x),
            "samples": samples, "log_prob": dist.log_prob(samples)}


@case
def microbatch(m):
    o, jnp = m.optax, m.jnp
    xs = jnp.asarray(_array(8, 3, seed=43))
    ys = jnp.asarray(_array(8, seed=44))

    def batch_loss(w, x, y):
        return jnp.sum((x @ w - y) ** 2)

    w = jnp.asarray(np.array([0.5, -0.25, 1.0], np.float32))
    grad_fn = m.jax.grad(batch_loss)
    acc = o.microbatching.AccumulationType
    per_example = lambda w, x, y: x @ w - y  # noqa: E731
    return {"sum": o.microbatch(grad_fn, argnums=(1, 2), microbatch_size=2)(w, xs, ys),
            "mean": o.microbatch(grad_fn, (1, 2), 4, acc.MEAN)(w, xs, ys),
            "running": o.microbatch(grad_fn, (1, 2), 2, acc.RUNNING_MEAN)(w, xs, ys),
            "concat": o.microbatch(per_example, (1, 2), 2, acc.CONCAT)(w, xs, ys),
            "kwargs": o.microbatch(lambda w, x, y: batch_loss(w, x, y), 1, 4,
                                   argnames="y")(w, xs, y=ys)}


@case
def perturbations(m):
    pt, jnp = m.optax.perturbations, m.jnp
    key = m.jax.random.PRNGKey(11)
    x = jnp.asarray(np.array([0.3, -0.2, 0.1], np.float32))

    def argmax_one_hot(v):
        return (v == jnp.max(v)).astype(jnp.float32)

    smooth = pt.make_perturbed_fun(argmax_one_hot, num_samples=64, sigma=0.5)
    smooth_normal = pt.make_perturbed_fun(lambda v: jnp.maximum(v, 0.0), 32, 0.3,
                                          noise=pt.Normal(), use_baseline=False)
    return {"value": smooth(key, x), "normal": smooth_normal(key, x),
            "grad": m.jax.grad(lambda v: jnp.sum(smooth(key, v) * jnp.arange(3.0)))(x),
            "log_probs": [pt.Gumbel().log_prob(x), pt.Normal().log_prob(x)]}
