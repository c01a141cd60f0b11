"""Records JAX's outputs for the cases `tests/test_jax_semantics.py` compares funcgrad with.

Run it in a throwaway virtual environment (JAX is never a funcgrad dependency):

    /tmp/jaxnames/bin/python tools/record_jax_references.py

It writes `tests/golden/jax/references.npz`: for each case `NAME`, its inputs `NAME/in/ARG`
(seeded numpy arrays) and JAX's outputs `NAME/out/I`; the keyword arguments of each case are
in `CASES` below, which the test imports (it needs no JAX).
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


# name -> (function path, input builder, keyword arguments)
CASES = {
    "attention_plain": ("nn.dot_product_attention",
                        lambda r: _attention_inputs(r, 2, 3, 4, 2, 2, 8), {}),
    "attention_gqa_bias_mask_scale": (
        "nn.dot_product_attention",
        lambda r: _attention_inputs(r, 2, 3, 5, 4, 2, 8, bias=(2, 4, 3, 5), mask=(2, 1, 3, 5)),
        {"scale": 0.3}),
    "attention_causal_window_lengths_residual": (
        "nn.dot_product_attention",
        lambda r: _attention_inputs(r, 2, 5, 5, 2, 1, 4, lengths=True),
        {"is_causal": True, "local_window_size": (2, 1), "return_residual": True}),
    "attention_3d_causal_bias": (
        "nn.dot_product_attention",
        lambda r: _attention_inputs(r, 0, 4, 6, 2, 2, 4, bias=(1, 4, 6)),
        {"is_causal": True, "local_window_size": 1}),
}


def main():
    import jax

    jax.config.update("jax_platforms", "cpu")
    record = {}
    for name, (path, build, kwargs) in CASES.items():
        args = build(np.random.default_rng(sum(map(ord, name))))
        fn = jax
        for part in path.split("."):
            fn = getattr(fn, part)
        out = fn(**args, **kwargs)
        outs = out if isinstance(out, tuple) else (out,)
        record.update({f"{name}/in/{k}": v for k, v in args.items()})
        record.update({f"{name}/out/{i}": np.asarray(o) for i, o in enumerate(outs)})
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    np.savez_compressed(OUT, **record)
    print(f"{len(CASES)} cases, {len(record)} arrays -> {os.path.relpath(OUT)}")


if __name__ == "__main__":
    main()
