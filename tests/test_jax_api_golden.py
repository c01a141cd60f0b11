"""funcgrad against JAX 0.10.2's recorded answers (tests/golden/jax_api.json, written by
tools/record_jax_api.py): eval_shape, jax.dtypes, ravel_pytree, the segment reductions,
jax.image, checkpoint residuals per policy and pure_callback's vmap methods. The same
expression strings run on both sides (`jnp` is funcgrad.numpy here)."""

import functools
import json
import pathlib

import numpy as np
import pytest

import funcgrad as fg
import funcgrad.numpy as jnp
from funcgrad import dtypes, image, ops
from funcgrad.ad_checkpoint import checkpoint_name, saved_residuals
from funcgrad.flatten_util import ravel_pytree
from funcgrad.tree_util import tree_leaves, tree_map
from tools import record_jax_api as cases

GOLDEN = json.loads((pathlib.Path(__file__).parent / "golden" / "jax_api.json").read_text())


def close(a, b, tol=2e-5):
    np.testing.assert_allclose(np.asarray(a, np.float64), np.asarray(b, np.float64),
                               rtol=tol, atol=tol)


def _arg(spec):
    if spec[0] == "py":
        return spec[1]
    return fg.ShapeDtypeStruct(tuple(spec[1]), spec[2], weak_type=spec[3])


@pytest.mark.parametrize("src,args,want", GOLDEN["eval_shape"])
def test_eval_shape_matches_jax(src, args, want):
    got = fg.eval_shape(eval(src, {"jnp": jnp}), *map(_arg, args))
    got = tree_map(lambda s: [list(s.shape), str(s.dtype), s.weak_type], got)
    assert json.loads(json.dumps(got)) == want


def test_dtypes_match_jax():
    for t, want in GOLDEN["canonicalize_dtype"].items():
        assert str(dtypes.canonicalize_dtype(t)) == want, t
    for key, want in GOLDEN["issubdtype"].items():
        t, kind = key.split()
        assert dtypes.issubdtype(t, getattr(np, kind)) == want, key
        scalar_type = getattr(jnp, "bool_" if t == "bool" else t)  # (fnp.float32 & co)
        assert dtypes.issubdtype(scalar_type, getattr(jnp, kind)) == want, key
    for args, want in GOLDEN["result_type"]:
        got = dtypes.result_type(*[cases.result_type_arg(a, np) for a in args],
                                 return_weak_type_flag=True)
        assert [str(x) for x in got] == want, args
    for t, want in GOLDEN["scalar_type_of"].items():
        assert dtypes.scalar_type_of(np.zeros((), t)).__name__ == want, t
    for t, want in GOLDEN["itemsize_bits"].items():
        assert dtypes.itemsize_bits(t) == want, t


@pytest.mark.parametrize("tree,flat,dtype,leaf_dtypes", GOLDEN["ravel"])
def test_ravel_pytree_matches_jax(tree, flat, dtype, leaf_dtypes):
    values = tree_map(lambda s: jnp.asarray(cases.leaf_value(*s)), tree, is_leaf=cases.is_spec)
    got, unravel = ravel_pytree(values)
    assert str(got.dtype) == dtype
    close(got, flat)
    back = unravel(got)
    assert [str(x.dtype) for x in tree_leaves(back)] == leaf_dtypes
    for a, b in zip(tree_leaves(back), tree_leaves(values)):
        close(a, b)


@pytest.mark.parametrize("shape,ids,num,opts,want", GOLDEN["segments"])
def test_segment_reductions_match_jax(shape, ids, num, opts, want):
    data = np.cos(np.arange(int(np.prod(shape)))).reshape(shape).astype(np.float32)
    for op, expected in want.items():
        got = getattr(ops, f"segment_{op}")(data, jnp.array(ids), num, **opts)
        close(got, expected)


@pytest.mark.parametrize("case", GOLDEN["resize"], ids=lambda c: f"{c[2]}-{c[3]}-{c[0]}")
def test_resize_and_its_gradient_match_jax(case):
    shape, out, method, antialias, want, want_grad = case
    x = cases.image(shape)
    ct = cases.image(out) * 0.5 + 0.25
    y, vjp = fg.vjp(lambda x: image.resize(x, out, method, antialias=antialias), x)
    close(y, want)
    close(vjp(jnp.asarray(ct, y.dtype))[0], want_grad)


@pytest.mark.parametrize("case", GOLDEN["scale_and_translate"], ids=lambda c: c[5])
def test_scale_and_translate_and_its_gradients_match_jax(case):
    shape, out, dims, scale, trans, method, want, want_grads = case
    x = cases.image(shape)
    f = functools.partial(image.scale_and_translate, shape=out, spatial_dims=dims,
                          method=method)
    close(f(x, scale=jnp.array(scale), translation=jnp.array(trans)), want)
    grads = fg.grad(lambda s, t: jnp.sum(jnp.sin(f(x, scale=s, translation=t))), (0, 1))(
        jnp.array(scale), jnp.array(trans))
    for g, w in zip(grads, want_grads):
        close(g, w, 1e-4)


# JAX's offloading policy keeps the product in host memory (a device_put); funcgrad has one
# memory, so an offloaded value is a saved one: the product itself.
_OFFLOADED = {("f32<host>[2,3]", "primitive device_put"): ["f32[2,3]", "primitive dot_general"]}


@pytest.mark.parametrize("policy", sorted(GOLDEN["residuals"]))
def test_checkpoint_policies_keep_jaxs_residuals(policy):
    ns = {"jnp": jnp, "checkpoint_name": checkpoint_name}
    exec(cases.block_source(), ns)
    f = fg.checkpoint(ns["block"], policy=eval(policy, {"P": fg.checkpoint_policies}))
    got = sorted([a.str_short(), cases.residual_kind(s)]
                 for a, s in saved_residuals(f, cases.image([2, 3]), cases.image([3, 3])))
    want = sorted(_OFFLOADED.get(tuple(r), r) for r in GOLDEN["residuals"][policy])
    assert got == want


@pytest.mark.parametrize("method", sorted(GOLDEN["callbacks"]))
def test_pure_callback_vmap_methods_call_as_jax(method):
    seen = []

    def callback(x, y):
        seen.append([list(np.shape(x)), list(np.shape(y))])
        return np.asarray(x) + np.asarray(y)

    def fun(x, y):
        out = fg.ShapeDtypeStruct(jnp.broadcast_shapes(x.shape, jnp.shape(y)), x.dtype)
        return fg.pure_callback(callback, out, x, y, vmap_method=method)
    out = fg.vmap(fun, in_axes=(0, None))(jnp.arange(4.0), jnp.float32(1.0))
    want_shapes, want = GOLDEN["callbacks"][method]
    assert seen == want_shapes
    close(out, want)
