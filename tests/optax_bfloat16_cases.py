"""Optimizers on bfloat16 parameters, run by optax 0.2.8 (`tools/record_optax_bfloat16.py`,
with JAX) and by funcgrad.optim (`tests/test_bfloat16_optim.py`, without JAX) on the same
inputs: each case takes `(optax, jnp)` and returns what is compared (the dtypes of the
updates and of the first transformation's state leaves, the parameters' bits after three
steps).
"""

import numpy as np

STEPS = 3


def _inputs(jnp):
    rng = np.random.default_rng(0)
    params = {"w": rng.normal(size=(3, 4)).astype(np.float32),
              "b": rng.normal(size=(4,)).astype(np.float32)}
    grads = [{k: rng.normal(size=v.shape).astype(np.float32) for k, v in params.items()}
             for _ in range(STEPS)]
    cast = lambda tree: {k: jnp.asarray(v).astype(jnp.bfloat16) for k, v in tree.items()}
    return cast(params), [cast(g) for g in grads]


def _leaves_dtypes(tree):
    out = []

    def walk(x):
        if hasattr(x, "dtype") and hasattr(x, "shape"):
            out.append(str(x.dtype))
        elif isinstance(x, dict):
            for k in sorted(x):
                walk(x[k])
        elif isinstance(x, (tuple, list)):
            for v in x:
                walk(v)
    walk(tree)
    return out


def _bits(tree):
    return {k: np.asarray(v).view(np.uint16).ravel().tolist() for k, v in sorted(tree.items())}


def run(optax, jnp, name):
    """The record of optimizer `name` (a key of `OPTIMIZERS`) on bfloat16 parameters."""
    opt = OPTIMIZERS[name](optax)
    params, grads = _inputs(jnp)
    state = opt.init(params)
    # the first transformation's state: funcgrad's scale_by_learning_rate keeps a state where
    # optax's has none
    record = {"state_dtypes": _leaves_dtypes(state[0])}
    for g in grads:
        updates, state = opt.update(g, state, params)
        params = optax.apply_updates(params, updates)
    record["update_dtypes"] = _leaves_dtypes(updates)
    record["final_state_dtypes"] = _leaves_dtypes(state[0])
    record["param_dtypes"] = _leaves_dtypes(params)
    record["param_bits"] = _bits(params)
    return record


OPTIMIZERS = {
    "adam": lambda optax: optax.adam(1e-2),
    "adamw": lambda optax: optax.adamw(1e-2, weight_decay=1e-2),
    "lion": lambda optax: optax.lion(1e-3),
    "sgd_momentum": lambda optax: optax.sgd(1e-2, momentum=0.9),
    "rmsprop": lambda optax: optax.rmsprop(1e-3),
    "adagrad": lambda optax: optax.adagrad(1e-2),
    "adam_mu_float32": lambda optax: optax.adam(1e-2, mu_dtype="float32"),
}
