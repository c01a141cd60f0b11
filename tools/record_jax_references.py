"""Records JAX's outputs for the cases `tests/test_jax_semantics.py` compares funcgrad with.

Run it in a throwaway virtual environment (JAX is never a funcgrad dependency):

    /tmp/jaxnames/bin/python tools/record_jax_references.py

It writes `tests/golden/jax/references.npz`: for each case `NAME`, its inputs `NAME/in/ARG`
(seeded numpy arrays) and JAX's outputs `NAME/out/I`; the keyword arguments of each case are
in `CASES` below, which the test imports (it needs no JAX). A function path starting with
`optax.` names an optimizer: its inputs are `params` and `grads` (one gradient per step) and
its output the stacked updates of `OPTAX_STEPS` steps.
"""

import os

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "tests", "golden", "jax", "references.npz")


def _attention_inputs(rng, b, t, s, n, k, h, bias=None, mask=None, lengths=False):
    f = lambda *shape: rng.standard_normal(shape).astype(np.float32)
    lead = (b,) if b else ()
    args = {"query": f(*lead, t, n, h), "key": f(*lead, s, k, h), "value": f(*lead, s, k, h)}
    if bias:
        args["bias"] = f(*bias)
    if mask:
        args["mask"] = rng.random(mask) < 0.7
    if lengths:
        args["query_seq_lengths"] = np.array([t - 1, t][:b], np.int32)
        args["key_value_seq_lengths"] = np.array([s, 2][:b], np.int32)
    return args


OPTAX_STEPS = 4


def _optax_inputs(rng):
    return {"params": rng.standard_normal((2, 3)).astype(np.float32),
            "grads": rng.standard_normal((OPTAX_STEPS, 2, 3)).astype(np.float32)}


def run_optimizer(opt, params, grads):
    """The updates of `opt` over the gradient steps (works for optax and funcgrad.optim)."""
    state, out = opt.init(params), []
    for g in grads:
        updates, state = opt.update(g, state, params)
        out.append(np.asarray(updates))
    return np.stack(out)


# name -> (function path, input builder, keyword arguments)
CASES = {
    "attention_plain": ("jax.nn.dot_product_attention",
                        lambda r: _attention_inputs(r, 2, 3, 4, 2, 2, 8), {}),
    "attention_gqa_bias_mask_scale": (
        "jax.nn.dot_product_attention",
        lambda r: _attention_inputs(r, 2, 3, 5, 4, 2, 8, bias=(2, 4, 3, 5), mask=(2, 1, 3, 5)),
        {"scale": 0.3}),
    "attention_causal_window_lengths_residual": (
        "jax.nn.dot_product_attention",
        lambda r: _attention_inputs(r, 2, 5, 5, 2, 1, 4, lengths=True),
        {"is_causal": True, "local_window_size": (2, 1), "return_residual": True}),
    "attention_3d_causal_bias": (
        "jax.nn.dot_product_attention",
        lambda r: _attention_inputs(r, 0, 4, 6, 2, 2, 4, bias=(1, 4, 6)),
        {"is_causal": True, "local_window_size": 1}),
    "rmsprop_bias_correction": ("optax.rmsprop", _optax_inputs,
                                {"learning_rate": 0.1, "bias_correction": True}),
    "rmsprop_centered_eps_outside": ("optax.rmsprop", _optax_inputs,
                                     {"learning_rate": 0.1, "centered": True,
                                      "eps_in_sqrt": False, "eps": 1e-3}),
    "scale_by_stddev_bias_correction": ("optax.scale_by_stddev", _optax_inputs,
                                        {"bias_correction": True, "decay": 0.5,
                                         "eps": 1e-2}),
    "scale_by_stddev_eps_outside": ("optax.scale_by_stddev", _optax_inputs,
                                    {"eps_in_sqrt": False, "eps": 1e-2}),
    "scale_by_lion_smooth": ("optax.scale_by_lion", _optax_inputs,
                             {"mode": "smooth", "smooth_beta": 2.0}),
    "scale_by_lion_refined": ("optax.scale_by_lion", _optax_inputs, {"mode": "refined"}),
}


def main():
    import jax
    import optax

    jax.config.update("jax_platforms", "cpu")
    record = {}
    for name, (path, build, kwargs) in CASES.items():
        args = build(np.random.default_rng(sum(map(ord, name))))
        fn = {"jax": jax, "optax": optax}[path.split(".")[0]]
        for part in path.split(".")[1:]:
            fn = getattr(fn, part)
        if path.startswith("optax."):
            out = run_optimizer(fn(**kwargs), args["params"], args["grads"])
        else:
            out = fn(**args, **kwargs)
        outs = out if isinstance(out, tuple) else (out,)
        record.update({f"{name}/in/{k}": v for k, v in args.items()})
        record.update({f"{name}/out/{i}": np.asarray(o) for i, o in enumerate(outs)})
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    np.savez_compressed(OUT, **record)
    print(f"{len(CASES)} cases, {len(record)} arrays -> {os.path.relpath(OUT)}")


if __name__ == "__main__":
    main()
