"""Cases run twice: by `tools/record_optax_golden.py` with optax, jax.numpy and jax (recorded in
`tests/golden/optax_golden.json`), and by `tests/test_optim_golden.py` with funcgrad.optim,
funcgrad.numpy and funcgrad, which compares the two. Only the module namespace `m` differs:
each case is written once, as optax code (`m.optax.adam(0.1)`, `m.jnp.sum(...)`,
`m.jax.grad(...)`), so it also shows that optax code runs on funcgrad unchanged.

This module holds the shared data, the optimizers, wrappers, schedules and line searches;
`optax_cases_more.py` registers the rest (`all_cases()` loads both). It imports numpy only
(the recorder runs it without funcgrad, the tests without JAX).
"""

import inspect
from collections import namedtuple

import numpy as np

Frameworks = namedtuple("Frameworks", "optax jnp jax")

NAMESPACES = ["optax", "optax.schedules", "optax.losses", "optax.transforms", "optax.contrib",
              "optax.tree_utils", "optax.tree", "optax.projections", "optax.perturbations",
              "optax.second_order", "optax.assignment"]

CASES = {}


def case(fn):
    """Registers `fn(m) -> pytree of arrays` under its name."""
    CASES[fn.__name__] = fn
    return fn


def all_cases():
    """Every case, those of `optax_cases_more` included."""
    import optax_cases_more  # noqa: F401  (registers its cases)
    return CASES


# ---------------------------------------------------------------------------------------------
# Describing an API entry (signatures compared by tests/test_optim_api.py)


def _default(value):
    if value is inspect.Parameter.empty:
        return "<required>"
    if value is None or isinstance(value, (bool, int, float, str)):
        return repr(value)
    if hasattr(type(value), "_fields"):
        return f"<{type(value).__name__}>"
    if isinstance(value, tuple):
        return "(" + ", ".join(_default(v) for v in value) + ")"
    if isinstance(value, type):
        try:
            return f"<dtype {np.dtype(value).name}>"
        except TypeError:
            return f"<class {value.__name__}>"
    if callable(value):
        return f"<function {getattr(value, '__name__', type(value).__name__)}>"
    return f"<{type(value).__name__}>"


def signature(fn):
    """[[name, kind, default], ...] of `fn`'s parameters, or None when it has none to show."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    return [[p.name, p.kind.name, _default(p.default)] for p in sig.parameters.values()]


def _is_type_alias(value):
    module = getattr(type(value), "__module__", "")
    return module in ("typing", "types", "_collections_abc") or repr(value) == "typing.Any"


def describe(value):
    """{"kind", "signature", "fields"} of one public name."""
    if _is_type_alias(value):
        return {"kind": "type alias", "fields": None, "signature": None}
    if inspect.isclass(value):
        if hasattr(value, "_fields"):
            return {"kind": "namedtuple", "fields": list(value._fields), "signature": None}
        own_init = "__init__" in vars(value) or hasattr(value, "__dataclass_fields__")
        return {"kind": "class", "fields": None,
                "signature": signature(value) if own_init else None}
    if callable(value):
        return {"kind": "function", "fields": None, "signature": signature(value)}
    return {"kind": "value", "fields": None, "signature": None}


def to_json(tree):
    """Arrays as nested lists (floats as float64, ints, bools); dicts and sequences kept."""
    if isinstance(tree, dict):
        return {str(k): to_json(v) for k, v in tree.items()}
    if isinstance(tree, (list, tuple)):
        return [to_json(v) for v in tree]
    if tree is None or isinstance(tree, str):
        return tree
    array = np.asarray(tree)
    if array.dtype.kind == "b":
        return array.tolist()
    if array.dtype.kind in "iu":
        return array.astype(np.int64).tolist()
    return array.astype(np.float64).tolist()


# ---------------------------------------------------------------------------------------------
# Shared data: a small fixed pytree and a smooth loss over it


def _array(*shape, seed):
    rng = np.random.default_rng(seed)
    return rng.normal(size=shape).astype(np.float32)


PARAMS = {"w": _array(3, 4, seed=0), "b": _array(4, seed=1)}
TARGET = {"w": _array(3, 4, seed=2), "b": _array(4, seed=3)}
CURVATURE = {"w": (1.0 + np.arange(12, dtype=np.float32).reshape(3, 4) / 4),
             "b": np.array([0.5, 1.0, 2.0, 4.0], np.float32)}


def params(m):
    return {k: m.jnp.asarray(v) for k, v in PARAMS.items()}


def loss(m, p):
    """A smooth, non-quadratic loss: sum(c (p - t)**2 / 2 + (p - t)**4 / 10)."""
    total = 0.0
    for k in sorted(p):
        e = p[k] - m.jnp.asarray(TARGET[k])
        total = total + m.jnp.sum(0.5 * m.jnp.asarray(CURVATURE[k]) * e * e + 0.1 * e ** 4)
    return total


def run(m, opt, steps=5, extra_args=None, grads_fn=None):
    """`steps` updates of `opt` on `loss` from PARAMS; returns the final params.

    `extra_args(value, grads, params)` gives the keyword arguments of `update` (for the
    transformations that need the loss value); `grads_fn(t, grads)` alters the gradient.
    """
    p = params(m)
    state = opt.init(p)
    for t in range(steps):
        value, grads = m.jax.value_and_grad(lambda q: loss(m, q))(p)
        if grads_fn is not None:
            grads = grads_fn(t, grads)
        kwargs = extra_args(value, grads, p) if extra_args else {}
        updates, state = opt.update(grads, state, p, **kwargs)
        p = m.optax.apply_updates(p, updates)
    return p


def tree_a(m):
    return {"x": m.jnp.asarray(np.array([1.0, -2.0, 3.0], np.float32)),
            "y": [m.jnp.asarray(np.array([[0.5, -0.25], [4.0, 0.0]], np.float32))]}


def tree_b(m):
    return {"x": m.jnp.asarray(np.array([0.5, 1.5, -1.0], np.float32)),
            "y": [m.jnp.asarray(np.array([[2.0, 1.0], [-3.0, 0.75]], np.float32))]}


# ---------------------------------------------------------------------------------------------
# optax.tree_utils and numerics


@case
def tree_math(m):
    tu, a, b = m.optax.tree_utils, tree_a(m), tree_b(m)
    return {"add": tu.tree_add(a, b, a), "sub": tu.tree_sub(a, b), "mul": tu.tree_mul(a, b),
            "div": tu.tree_div(a, b), "scale": tu.tree_scale(0.5, a),
            "add_scale": tu.tree_add_scale(a, -2.0, b), "vdot": tu.tree_vdot(a, b),
            "sum": tu.tree_sum(a), "max": tu.tree_max(a), "min": tu.tree_min(a),
            "size": tu.tree_size(a), "norm": tu.tree_norm(a), "norm1": tu.tree_norm(a, 1),
            "norm_inf": tu.tree_norm(a, "inf"), "sqnorm": tu.tree_norm(a, squared=True),
            "clip": tu.tree_clip(a, -1.0, 2.0), "where": tu.tree_where(True, a, b),
            "full_like": tu.tree_full_like(a, 3.0), "batch": tu.tree_batch_shape(a, (2,)),
            "allclose": m.jnp.asarray(tu.tree_allclose(a, a))}


@case
def tree_moments(m):
    tu, a, b = m.optax.tree_utils, tree_a(m), tree_b(m)
    count = m.jnp.asarray(3, m.jnp.int32)
    return {"moment1": tu.tree_update_moment(a, b, 0.9, 1),
            "moment2": tu.tree_update_moment(a, b, 0.9, 2),
            "infinity": tu.tree_update_infinity_moment(a, b, 0.9, 1e-3),
            "per_elem": tu.tree_update_moment_per_elem_norm(a, b, 0.99, 2),
            "bias": tu.tree_bias_correction(a, 0.9, count),
            "top_level": m.optax.update_moment(a, b, 0.8, 2),
            "top_bias": m.optax.bias_correction(a, 0.999, count)}


@case
def numerics(m):
    o, jnp = m.optax, m.jnp
    x = jnp.asarray(np.array([[3.0, -4.0], [0.0, 1.0]], np.float32))
    z = jnp.zeros((3,), jnp.float32)
    big = jnp.asarray(np.iinfo(np.int32).max, jnp.int32)
    return {"norm": o.safe_norm(x, 1e-3), "norm_zero": o.safe_norm(z, 1e-3),
            "norm_axis": o.safe_norm(x, 0.5, axis=1),
            "norm_keep": o.safe_norm(x, 0.5, ord=1, axis=0, keepdims=True),
            "rms": o.safe_root_mean_squares(x, 1e-3), "rms_zero": o.safe_root_mean_squares(z, 1.0),
            "inc": o.safe_increment(jnp.asarray(4, jnp.int32)), "inc_max": o.safe_increment(big),
            "inc32": o.safe_int32_increment(big),
            "grad_norm": m.jax.grad(lambda v: o.safe_norm(v, 1e-3))(z)}


# ---------------------------------------------------------------------------------------------
# Optimizers: a few steps on `loss`; the final params are compared


def _piecewise(o):
    return o.piecewise_constant_schedule(0.1, {2: 0.5, 4: 0.1})


OPTIMIZERS = {
    "adabelief": lambda o: o.adabelief(0.05),
    "adabelief_nesterov": lambda o: o.adabelief(0.05, nesterov=True),
    "adadelta": lambda o: o.adadelta(1.0, weight_decay=0.01),
    "adadelta_no_lr": lambda o: o.adadelta(),
    "adafactor": lambda o: o.adafactor(0.05, min_dim_size_to_factor=2),
    "adafactor_unfactored": lambda o: o.adafactor(_piecewise(o)),
    "adafactor_momentum": lambda o: o.adafactor(
        0.05, min_dim_size_to_factor=3, momentum=0.9, weight_decay_rate=0.01,
        multiply_by_parameter_scale=False, clipping_threshold=None),
    "adamax": lambda o: o.adamax(0.05),
    "adamaxw": lambda o: o.adamaxw(0.05, weight_decay=0.1),
    "adan": lambda o: o.adan(0.05, weight_decay=0.01),
    "amsgrad": lambda o: o.amsgrad(0.05),
    "amsgrad_no_bias_correction": lambda o: o.amsgrad(0.05, bias_correction_mu=False,
                                                      bias_correction_nu=False),
    "fromage": lambda o: o.fromage(0.1),
    "fromage_schedule": lambda o: o.fromage(_piecewise(o)),
    "lamb": lambda o: o.lamb(0.05, weight_decay=0.01),
    "lars": lambda o: o.lars(0.5, weight_decay=0.01, trust_coefficient=0.1),
    "lars_nesterov": lambda o: o.lars(0.5, nesterov=True, momentum=0.8),
    "lion": lambda o: o.lion(0.01),
    "nadam": lambda o: o.nadam(0.05),
    "nadamw": lambda o: o.nadamw(0.05, weight_decay=0.1),
    "noisy_sgd": lambda o: o.noisy_sgd(0.05, key=3),
    "novograd": lambda o: o.novograd(0.05, weight_decay=0.01),
    "optimistic_gradient_descent": lambda o: o.optimistic_gradient_descent(0.05, 1.0, 0.5),
    "optimistic_adam_v2": lambda o: o.optimistic_adam_v2(0.05, alpha=1.0, beta=0.5),
    "radam": lambda o: o.radam(0.05),
    "radam_rectified": lambda o: o.radam(0.05, b2=0.9, nesterov=True),
    "rprop": lambda o: o.rprop(0.05),
    "sign_sgd": lambda o: o.sign_sgd(0.01),
    "signum": lambda o: o.signum(0.01),
    "sm3": lambda o: o.sm3(0.1),
    "yogi": lambda o: o.yogi(0.05),
    "sgd_schedule": lambda o: o.sgd(_piecewise(o), momentum=0.9, nesterov=True),
    "centralize": lambda o: o.chain(o.centralize(), o.sgd(0.05)),
    "normalize_by_update_norm": lambda o: o.chain(o.normalize_by_update_norm(0.3), o.scale(-1)),
    "param_block_norm": lambda o: o.chain(o.scale_by_param_block_norm(), o.sgd(0.05)),
    "param_block_rms": lambda o: o.chain(o.scale_by_param_block_rms(), o.sgd(0.05)),
    "distance_over_gradients": lambda o: o.chain(o.scale_by_distance_over_gradients(),
                                                 o.sgd(1.0)),
    "apply_every": lambda o: o.chain(o.apply_every(3), o.sgd(0.05)),
    "add_noise": lambda o: o.chain(o.add_noise(0.01, 0.55, 0), o.sgd(0.05)),
    "adaptive_grad_clip": lambda o: o.chain(o.adaptive_grad_clip(0.05), o.sgd(0.1)),
    "clip_by_block_rms": lambda o: o.chain(o.clip_by_block_rms(0.5), o.sgd(0.1)),
    "keep_params_nonnegative": lambda o: o.chain(o.sgd(0.3), o.keep_params_nonnegative()),
    "zero_nans": lambda o: o.chain(o.zero_nans(), o.adam(0.05)),
    "flatten": lambda o: o.flatten(o.adam(0.05)),
}


def _optimizer_case(make):
    return lambda m: run(m, make(m.optax), steps=7)


for _name, _make in OPTIMIZERS.items():
    CASES["opt_" + _name] = _optimizer_case(_make)


@case
def polyak_sgd(m):
    return run(m, m.optax.polyak_sgd(max_learning_rate=0.5, f_min=0.1),
               extra_args=lambda value, grads, p: {"value": value})


@case
def polyak_sgd_plus(m):
    return run(m, m.optax.polyak_sgd(scaling=0.5, f_min=100.0, variant="sps+"),
               extra_args=lambda value, grads, p: {"value": value})


@case
def factored_rms_state(m):
    o = m.optax
    opt = o.scale_by_factored_rms(min_dim_size_to_factor=2, decay_rate=0.5)
    p = params(m)
    state = opt.init(p)
    for _ in range(3):
        grads = m.jax.grad(lambda q: loss(m, q))(p)
        updates, state = opt.update(grads, state, p)
        p = o.apply_updates(p, o.tree_utils.tree_scale(-0.01, updates))
    return {"params": p, "state": [state.count, state.v_row, state.v_col, state.v]}


# ---------------------------------------------------------------------------------------------
# Wrappers and combinators


def _nan_at(steps):
    """A grads_fn that makes the gradient of 'b' NaN at the given steps."""
    def alter(t, grads):
        if t not in steps:
            return grads
        return {**grads, "b": grads["b"] * float("nan")}
    return alter


@case
def multi_steps(m):
    o = m.optax
    out = {}
    for mean in (True, False):
        ms = o.MultiSteps(o.adam(0.1), every_k_schedule=3, use_grad_mean=mean)
        p, state = params(m), None
        state = ms.init(p)
        flags = []
        for _ in range(7):
            grads = m.jax.grad(lambda q: loss(m, q))(p)
            updates, state = ms.update(grads, state, p)
            p = o.apply_updates(p, updates)
            flags.append(ms.has_updated(state))
        out[f"mean={mean}"] = {"params": p, "flags": flags, "mini_step": state.mini_step,
                               "gradient_step": state.gradient_step}
    return out


@case
def multi_steps_skip(m):
    o = m.optax
    ms = o.MultiSteps(o.sgd(0.1), every_k_schedule=lambda step: 2 + step,
                      should_skip_update_fn=o.skip_not_finite)
    opt = ms.gradient_transformation()
    p = params(m)
    state = opt.init(p)
    skips = []
    for t in range(8):
        grads = _nan_at({1, 4})(t, m.jax.grad(lambda q: loss(m, q))(p))
        updates, state = opt.update(grads, state, p)
        p = o.apply_updates(p, updates)
        skips.append(state.skip_state["num_not_finite"])
    return {"params": p, "skips": skips, "gradient_step": state.gradient_step}


@case
def apply_if_finite(m):
    o = m.optax
    opt = o.apply_if_finite(o.adam(0.1), max_consecutive_errors=1)
    p = params(m)
    state = opt.init(p)
    record = []
    for t in range(6):
        grads = _nan_at({1, 3, 4})(t, m.jax.grad(lambda q: loss(m, q))(p))
        updates, state = opt.update(grads, state, p)
        p = m.jax.tree.map(lambda x, u: m.jnp.where(m.jnp.isfinite(u), x + u, x), p, updates)
        record.append([state.notfinite_count, state.last_finite, state.total_notfinite])
    return {"params": p, "record": record}


@case
def conditional(m):
    o = m.optax
    even = lambda step: step % 2 == 0  # noqa: E731
    return {"mask": run(m, o.conditionally_mask(o.adam(0.1), even)),
            "transform": run(m, o.chain(o.conditionally_transform(o.scale(10.0), even),
                                        o.sgd(0.01)))}


def _labels(p):
    return {"w": "adam", "b": "sgd"}


@case
def partition(m):
    o = m.optax
    opt = o.partition({"adam": o.adam(0.1), "sgd": o.sgd(0.05, momentum=0.9)}, _labels)
    multi = o.multi_transform({"adam": o.adam(0.1), "sgd": o.set_to_zero()},
                              {"w": "adam", "b": "sgd"})
    return {"partition": run(m, opt), "multi_transform": run(m, multi),
            "freeze": run(m, o.chain(o.freeze({"w": True, "b": False}), o.sgd(0.1))),
            "selective": run(m, o.selective_transform(o.adam(0.1),
                                                      freeze_mask={"w": False, "b": True})),
            "named_chain": run(m, o.named_chain(("clip", o.clip_by_global_norm(1.0)),
                                                ("adam", o.adam(0.1))))}


@case
def stateless_transforms(m):
    o = m.optax
    double = o.stateless(lambda g, p: m.jax.tree.map(lambda x: 2 * x, g))
    decay = o.stateless_with_tree_map(lambda g, p: g + 0.1 * p)
    return {"stateless": run(m, o.chain(double, o.sgd(0.01))),
            "tree_map": run(m, o.chain(decay, o.sgd(0.05))),
            "extra_args": run(m, o.chain(o.with_extra_args_support(o.sgd(0.05))),
                              extra_args=lambda value, grads, p: {"unused": 1.0})}


@case
def measurements(m):
    o, tu = m.optax, m.optax.tree_utils
    p = params(m)
    opt = o.chain(o.snapshot("norm", tu.tree_norm),
                  o.monitor({"sum": tu.tree_sum,
                             "ema": o.measure_with_ema(tu.tree_norm, 0.5)}),
                  o.adam(0.1))
    state = opt.init(p)
    for _ in range(3):
        grads = m.jax.grad(lambda q: loss(m, q))(p)
        updates, state = opt.update(grads, state, p)
        p = o.apply_updates(p, updates)
    return {"snapshot": state[0].measurement["norm"],
            "sum": state[1].measurements["sum"], "ema": state[1].measurements["ema"],
            "params": p}


@case
def per_example_clipping(m):
    o, jnp = m.optax, m.jnp
    grads = {"a": jnp.asarray(_array(4, 3, seed=10)), "b": jnp.asarray(_array(4, 2, 2, seed=11))}
    summed, n = o.per_example_global_norm_clip(grads, 1.5)
    layer_sums, layer_n = o.per_example_layer_norm_clip(grads, 1.5)
    plain_sums, plain_n = o.per_example_layer_norm_clip(grads, 1.5, uniform=False)
    skip, info = o.skip_large_updates(grads, 0, None, 10.0)
    return {"summed": summed, "n": n, "layer_sums": layer_sums, "layer_n": layer_n,
            "plain_sums": plain_sums, "plain_n": plain_n,
            "unitwise": o.transforms.unitwise_norm(grads["b"]),
            "unitwise_axis": o.transforms.unitwise_norm(grads["a"], axis=1),
            "skip": skip, "norm_squared": info["norm_squared"]}


@case
def target_updates(m):
    o, a, b = m.optax, tree_a(m), tree_b(m)
    return {"incremental": o.incremental_update(a, b, 0.25),
            "periodic_yes": o.periodic_update(a, b, m.jnp.asarray(6), 3),
            "periodic_no": o.periodic_update(a, b, m.jnp.asarray(7), 3)}


# ---------------------------------------------------------------------------------------------
# Schedules (values at counts 0..40) and inject_hyperparams

SCHEDULES = {
    "constant": lambda s: s.constant_schedule(0.5),
    "polynomial": lambda s: s.polynomial_schedule(1.0, 0.1, 2.0, 20, 5),
    "linear": lambda s: s.linear_schedule(0.0, 1.0, 10, 3),
    "piecewise_constant": lambda s: s.piecewise_constant_schedule(1.0, {5: 0.5, 15: 0.1}),
    "exponential": lambda s: s.exponential_decay(1.0, 5, 0.5, 3, False, 0.1),
    "exponential_staircase": lambda s: s.exponential_decay(1.0, 5, 0.5, staircase=True),
    "exponential_growth": lambda s: s.exponential_decay(0.1, 5, 2.0, end_value=1.0),
    "cosine_decay": lambda s: s.cosine_decay_schedule(1.0, 30, 0.1, 2.0),
    "warmup_cosine": lambda s: s.warmup_cosine_decay_schedule(0.0, 1.0, 5, 30, 0.05),
    "warmup_constant": lambda s: s.warmup_constant_schedule(0.1, 1.0, 7),
    "warmup_exponential": lambda s: s.warmup_exponential_decay_schedule(
        0.0, 1.0, 5, 4, 0.5, 2, True, 0.05),
    "join": lambda s: s.join_schedules([s.constant_schedule(1.0),
                                        s.linear_schedule(1.0, 0.0, 10)], [8]),
    "piecewise_linear": lambda s: s.piecewise_interpolate_schedule(
        "linear", 1.0, {4: 2.0, 12: 0.25, 30: 0.0}),
    "piecewise_cosine": lambda s: s.piecewise_interpolate_schedule(
        "cosine", 1.0, {4: 2.0, 12: 0.25, 30: 0.5}),
    "linear_onecycle": lambda s: s.linear_onecycle_schedule(30, 1.0),
    "cosine_onecycle": lambda s: s.cosine_onecycle_schedule(30, 1.0, 0.2, 10.0, 100.0),
    "sgdr": lambda s: s.sgdr_schedule([dict(init_value=0.0, peak_value=1.0, warmup_steps=2,
                                            decay_steps=10, end_value=0.1)] * 3),
}


@case
def schedules(m):
    counts = m.jnp.arange(41)
    out = {}
    for name, make in SCHEDULES.items():
        schedule = make(m.optax.schedules)
        out[name] = [m.jnp.asarray(schedule(counts[i]), m.jnp.float32) for i in range(41)]
    return out


@case
def inject_hyperparams(m):
    o = m.optax
    opt = o.inject_hyperparams(o.adam)(learning_rate=o.linear_schedule(0.1, 0.01, 5), b1=0.8)
    p = params(m)
    state = opt.init(p)
    rates = [state.hyperparams["learning_rate"]]
    for t in range(6):
        grads = m.jax.grad(lambda q: loss(m, q))(p)
        if t == 3:
            state.hyperparams["b1"] = m.jnp.asarray(0.5)
        updates, state = opt.update(grads, state, p)
        p = o.apply_updates(p, updates)
        rates.append(state.hyperparams["learning_rate"])
    return {"params": p, "rates": rates, "b1": state.hyperparams["b1"], "count": state.count}


@case
def inject_static_and_sgd(m):
    o = m.optax
    opt = o.inject_hyperparams(o.sgd, static_args="nesterov")(0.05, momentum=0.9, nesterov=True)
    extra = o.inject_hyperparams(o.polyak_sgd)(max_learning_rate=0.5)
    return {"sgd": run(m, opt), "polyak": run(m, extra, extra_args=lambda v, g, p: {"value": v})}


# ---------------------------------------------------------------------------------------------
# L-BFGS and line searches


def _solve(m, opt, steps, from_state=False, with_aux=None):
    """Runs a line-search optimizer: value and grad from the state (value_and_grad_from_state)
    or freshly computed; returns params, values and the line-search info per step."""
    o = m.optax
    fn = lambda q: loss(m, q)  # noqa: E731
    value_and_grad = (o.value_and_grad_from_state(fn) if from_state
                      else lambda q, state: m.jax.value_and_grad(fn)(q))
    p = params(m)
    state = opt.init(p)
    values = []
    for _ in range(steps):
        value, grad = value_and_grad(p, state=state)
        updates, state = opt.update(grad, state, p, value=value, grad=grad, value_fn=fn)
        p = o.apply_updates(p, updates)
        values.append(value)
    return {"params": p, "values": values}


@case
def lbfgs(m):
    o = m.optax
    return {"default": _solve(m, o.lbfgs(), 6, from_state=True),
            "memory3": _solve(m, o.lbfgs(memory_size=3, scale_init_precond=False), 6),
            "backtracking": _solve(m, o.lbfgs(linesearch=o.scale_by_backtracking_linesearch(
                15, store_grad=True)), 5, from_state=True),
            "plain": run(m, o.chain(o.scale_by_lbfgs(memory_size=4), o.scale(-0.1)), steps=6)}


@case
def linesearches(m):
    o = m.optax
    zoom_keep = o.chain(o.sgd(1.0), o.scale_by_zoom_linesearch(10))
    zoom_capped = o.chain(o.sgd(1.0), o.scale_by_zoom_linesearch(
        8, max_learning_rate=0.05, initial_guess_strategy="one"))
    backtrack = o.chain(o.sgd(1.0), o.scale_by_backtracking_linesearch(
        20, decrease_factor=0.5, increase_factor=2.0))
    return {"zoom_keep": _solve(m, zoom_keep, 4), "zoom_capped": _solve(m, zoom_capped, 4),
            "backtracking": _solve(m, backtrack, 4)}


@case
def linesearch_with_fn_kwargs(m):
    o = m.optax
    opt = o.chain(o.sgd(1.0), o.scale_by_zoom_linesearch(10))

    def fn(q, shift):
        return loss(m, q) + shift * m.jnp.sum(q["b"] ** 2)

    p = params(m)
    state = opt.init(p)
    for _ in range(3):
        value, grad = m.jax.value_and_grad(fn)(p, 0.5)
        updates, state = opt.update(grad, state, p, value=value, grad=grad, value_fn=fn,
                                    shift=0.5)
        p = o.apply_updates(p, updates)
    return {"params": p, "lr": state[1].learning_rate,
            "steps": state[1].info.num_linesearch_steps}
