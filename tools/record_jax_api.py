"""Records JAX's answers for the issue-28 API (abstract evaluation, jax.dtypes, ravel_pytree,
segment reductions, jax.image, pure_callback's vmap methods, checkpoint residuals) into
tests/golden/jax_api.json, which tests/test_jax_api_golden.py replays on funcgrad without JAX.

Run it with JAX installed (never a funcgrad dependency):

    /work/jaxvenv/bin/python tools/record_jax_api.py

Every case is data: the same expression strings are evaluated with `jnp` bound to jax.numpy
here and to funcgrad.numpy in the test, so both sides run the same program.
"""

import functools
import json
import os

import numpy as np

# --- the cases (shared with the test through the JSON file) -------------------------------------

EVAL_SHAPE = [  # (function source, arguments: ["sds", shape, dtype, weak] | ["py", value])
    ("lambda x: x * 2", [["py", 1.0]]),
    ("lambda x: x * 2", [["sds", [2], "float32", True]]),
    ("lambda x: x", [["sds", [3], "float64", False]]),
    ("lambda x, y: {'a': x @ y, 'b': (x.sum(),)}",
     [["sds", [2, 3], "float32", False], ["sds", [3, 4], "float32", False]]),
    ("lambda x: x.astype(jnp.int8) + 1", [["sds", [5], "float32", False]]),
    ("lambda x: (x > 0, jnp.argmax(x))", [["sds", [4, 2], "float32", False]]),
    ("lambda x: jnp.ones((1 << 15, 1 << 15, 8)) @ x", [["sds", [8], "float32", False]]),
    ("lambda i: i // 2", [["py", 3]]),
    ("lambda x, n: x * n", [["sds", [2], "int32", False], ["py", 2.5]]),
]

DTYPES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint32", "uint64", "float16",
          "float32", "float64", "complex64", "complex128"]
KINDS = ["floating", "integer", "signedinteger", "unsignedinteger", "inexact", "number",
         "complexfloating", "bool_", "generic"]
RESULT_TYPE = [  # argument lists: dtype names, or Python scalars written "py:<literal>"
    ["float32", "py:1.0"], ["int8", "py:1"], ["int8", "uint8"], ["float16", "py:1"],
    ["int32", "float16"], ["bool", "py:1"], ["py:1", "py:1.0"], ["py:1.0", "py:1j"],
    ["uint32", "int32"], ["float32"], ["bool", "py:True"],
]

RAVEL = [  # pytrees of (shape, dtype) leaves, filled with arange values
    {"w": [[2, 2], "float32"], "b": [[2], "float32"]},
    [[[3], "float32"], [[2], "int32"]],
    {"a": [[2], "int8"], "b": [[1, 2], "float16"], "c": [[], "bool"]},
]

SEGMENTS = [  # (data shape, ids, num_segments, options)
    ([6], [0, 0, 1, 1, 5, -1], 3, {}),
    ([6], [0, 0, 1, 1, 5, -1], 3, {"mode": "clip"}),
    ([6, 2], [2, 0, 2, 1, 0, 2], 4, {}),
    ([7], [0, 1, 1, 2, 2, 2, 3], 4, {"bucket_size": 2}),
    ([5], [1, 1, 1, 1, 1], None, {"indices_are_sorted": True}),
    ([4], [0, 2, 2, 3], 5, {"unique_indices": False, "mode": "drop"}),
]

RESIZE_METHODS = ["nearest", "linear", "bilinear", "cubic", "bicubic", "lanczos3", "lanczos5",
                  "cubic-pytorch", "area"]
RESIZE_SHAPES = [([4, 5], [7, 3]), ([2, 6, 6, 3], [2, 3, 4, 3]), ([3, 8], [3, 16])]
SCALE_TRANSLATE = [  # (image shape, out shape, spatial dims, scale, translation, method)
    ([4, 5], [6, 4], [0, 1], [1.5, 0.8], [0.5, -0.25], "linear"),
    ([8], [5], [0], [0.6], [1.0], "lanczos3"),
    ([2, 5, 3], [2, 9, 3], [1], [1.8], [0.3], "cubic"),
]

POLICIES = [  # policy source (over `P = checkpoint_policies`)
    "None", "P.nothing_saveable", "P.dots_saveable", "P.checkpoint_dots",
    "P.dots_with_no_batch_dims_saveable", "P.save_only_these_names('h')",
    "P.save_any_names_but_these('h')", "P.save_any_names_but_these('zz')",
    "P.save_from_both_policies(P.dots_saveable, P.save_only_these_names('h'))",
    "P.save_and_offload_only_these_names(names_which_can_be_saved=['h'], "
    "names_which_can_be_offloaded=[], offload_src='device', offload_dst='pinned_host')",
    "P.offload_dot_with_no_batch_dims('device', 'pinned_host')",
]

CALLBACK_METHODS = ["sequential", "sequential_unrolled", "expand_dims", "broadcast_all",
                    "legacy_vectorized"]


def result_type_arg(a, jnp):
    """A RESULT_TYPE argument: a Python scalar ("py:1.0") or a dtype of `jnp`."""
    return eval(a[3:]) if a.startswith("py:") else jnp.dtype(a)


def is_spec(x):
    """A `[shape, dtype]` leaf of a RAVEL tree."""
    return isinstance(x, list) and len(x) == 2 and isinstance(x[1], str)


def leaf_value(shape, dtype):
    n = int(np.prod(shape)) if shape else 1
    return (np.arange(n) % 5 + 1).reshape(shape).astype(dtype)


def image(shape):
    return np.cos(np.arange(int(np.prod(shape))) * 0.7).reshape(shape).astype(np.float32)


def block_source():
    return ("def block(x, w):\n"
            "    h = checkpoint_name(jnp.tanh(x @ w), 'h')\n"
            "    return jnp.sum(jnp.sin(h * 2.0) @ w.T)\n")


def residual_kind(description):
    """'argument x', 'named h', 'primitive tanh' or 'literal' from a residual description."""
    if description.startswith("from the argument"):
        return "argument " + description.split()[3]
    if description.startswith("named"):
        return "named " + description.split("'")[1]
    if description.startswith("output of"):
        return "primitive " + description.split()[2]
    return description.split()[-1]


# --- recording ----------------------------------------------------------------------------------

def record_eval_shape(jax, jnp):
    def arg(spec):
        if spec[0] == "py":
            return spec[1]
        return jax.ShapeDtypeStruct(tuple(spec[1]), spec[2], weak_type=spec[3])

    def struct(s):
        return [list(s.shape), str(s.dtype), bool(s.weak_type)]
    return [[src, args, jax.tree_util.tree_map(
        struct, jax.eval_shape(eval(src, {"jnp": jnp}), *map(arg, args)))]
        for src, args in EVAL_SHAPE]


def record_dtypes(jax, jnp):
    d = jax.dtypes
    return {
        "canonicalize_dtype": {t: str(d.canonicalize_dtype(t)) for t in DTYPES},
        "issubdtype": {f"{t} {k}": bool(d.issubdtype(t, getattr(jnp, k)))
                       for t in DTYPES for k in KINDS},
        "result_type": [[args, [str(x) for x in d.result_type(
            *[result_type_arg(a, jnp) for a in args], return_weak_type_flag=True)]]
            for args in RESULT_TYPE],
        "scalar_type_of": {t: d.scalar_type_of(np.zeros((), t)).__name__ for t in DTYPES},
        "itemsize_bits": {t: d.itemsize_bits(t) for t in DTYPES},
    }


def record_ravel(jax):
    from jax.flatten_util import ravel_pytree
    out = []
    for tree in RAVEL:
        values = jax.tree_util.tree_map(lambda s: leaf_value(*s), tree, is_leaf=is_spec)
        flat, unravel = ravel_pytree(values)
        out.append([tree, np.asarray(flat).tolist(), str(flat.dtype),
                    [str(x.dtype) for x in jax.tree_util.tree_leaves(unravel(flat))]])
    return out


def record_segments(jax, jnp):
    out = []
    for shape, ids, num, opts in SEGMENTS:
        data = np.cos(np.arange(int(np.prod(shape)))).reshape(shape).astype(np.float32)
        out.append([shape, ids, num, opts, {
            op: np.asarray(getattr(jax.ops, f"segment_{op}")(data, jnp.array(ids), num, **opts))
            .tolist() for op in ("sum", "prod", "max", "min")}])
    return out


def record_resize(jax, jnp):
    out = []
    for shape, size in RESIZE_SHAPES:
        x, ct = image(shape), image(size) * 0.5 + 0.25
        for m in RESIZE_METHODS:
            for aa in (True, False):
                f = functools.partial(jax.image.resize, shape=size, method=m, antialias=aa)
                y, vjp = jax.vjp(f, x)
                g = vjp(jnp.asarray(ct, y.dtype))[0]
                out.append([shape, size, m, aa, np.asarray(y).tolist(), np.asarray(g).tolist()])
    return out


def record_scale_and_translate(jax, jnp):
    out = []
    for shape, size, dims, scale, trans, m in SCALE_TRANSLATE:
        x = image(shape)
        f = functools.partial(jax.image.scale_and_translate, x, shape=size, spatial_dims=dims,
                              method=m)
        y = f(scale=jnp.array(scale), translation=jnp.array(trans))
        loss = functools.partial(lambda f, s, t: jnp.sum(jnp.sin(f(scale=s, translation=t))), f)
        gs = jax.grad(loss, (0, 1))(jnp.array(scale), jnp.array(trans))
        out.append([shape, size, dims, scale, trans, m, np.asarray(y).tolist(),
                    [np.asarray(g).tolist() for g in gs]])
    return out


def record_residuals(jax, jnp):
    from jax._src.ad_checkpoint import saved_residuals  # (print_saved_residuals prints it)
    from jax.ad_checkpoint import checkpoint_name
    ns = {"jnp": jnp, "checkpoint_name": checkpoint_name}
    exec(block_source(), ns)
    out = {}
    for src in POLICIES:
        f = jax.checkpoint(ns["block"], policy=eval(src, {"P": jax.checkpoint_policies}))
        res = saved_residuals(f, image([2, 3]), image([3, 3]))
        out[src] = sorted([a.str_short(short_dtypes=True), residual_kind(s)] for a, s in res)
    return out


def record_callbacks(jax, jnp):
    out = {}
    for m in CALLBACK_METHODS:
        seen = []

        def callback(x, y, seen=seen):
            seen.append([list(np.shape(x)), list(np.shape(y))])
            return np.asarray(x) + np.asarray(y)

        def fun(x, y, m=m, callback=callback):
            shape = jnp.broadcast_shapes(x.shape, jnp.shape(y))
            return jax.pure_callback(callback, jax.ShapeDtypeStruct(shape, x.dtype), x, y,
                                     vmap_method=m)
        got = jax.vmap(fun, in_axes=(0, None))(jnp.arange(4.0), jnp.float32(1.0))
        out[m] = [seen, np.asarray(got).tolist()]
    return out


def main():
    import jax
    import jax.numpy as jnp

    rec = {"versions": {"jax": jax.__version__}, "eval_shape": record_eval_shape(jax, jnp),
           "ravel": record_ravel(jax), "segments": record_segments(jax, jnp),
           "resize": record_resize(jax, jnp),
           "scale_and_translate": record_scale_and_translate(jax, jnp),
           "residuals": record_residuals(jax, jnp), "callbacks": record_callbacks(jax, jnp),
           **record_dtypes(jax, jnp)}
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "golden",
                        "jax_api.json")
    with open(path, "w") as f:
        json.dump(rec, f, sort_keys=True)
        f.write("\n")
    print(f"wrote {os.path.normpath(path)}")


if __name__ == "__main__":
    main()
