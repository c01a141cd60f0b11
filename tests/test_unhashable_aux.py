"""A registered pytree whose flatten returns unhashable aux data (a dict holding a list) works
wherever JAX takes it: flatten/unflatten, treedef equality and hashing, jit (its cache
included), vmap, grad, jvp and their compositions. JAX's treedef hash leaves aux data out and
its equality compares them; jit raises only for static arguments, which it must hash."""

import numpy as np
import pytest

import funcgrad as fg
import funcgrad.numpy as fnp
from funcgrad import tree_util
from funcgrad.errors import FuncgradTypeError


class Layer:
    """Weights plus metadata kept as aux data (a dict with a list: unhashable)."""

    def __init__(self, w, meta):
        self.w, self.meta = w, meta


tree_util.register_pytree_node(Layer, lambda m: ((m.w,), m.meta),
                               lambda aux, children: Layer(children[0], aux))


def _layer(w, name="dense", sizes=(3,)):
    return Layer(fnp.asarray(w, fnp.float32), {"name": name, "sizes": list(sizes)})


def _loss(m):
    return fnp.sum(fnp.sin(m.w) * m.meta["sizes"][0])


def test_flatten_unflatten_and_treedef_equality_and_hash():
    m = _layer([1.0, 2.0, 3.0])
    leaves, td = tree_util.tree_flatten(m)
    back = tree_util.tree_unflatten(td, leaves)
    assert back.meta == m.meta and back.w is m.w
    same = tree_util.tree_structure(_layer([0.0, 0.0, 0.0]))
    other = tree_util.tree_structure(_layer([0.0, 0.0, 0.0], name="conv"))
    assert td == same and hash(td) == hash(same) and td != other
    assert {td: "hit"}[same] == "hit" and len({td, same, other}) == 2
    assert tree_util.tree_map(lambda x: 2 * x, m).meta == m.meta


def test_array_aux_data_is_a_clear_error_on_comparison():
    def structure():
        return tree_util.tree_structure(Layer(1.0, np.arange(3)))
    with pytest.raises(ValueError, match="equality of the aux data.*arrays cannot be aux"):
        _ = structure() == structure()


def test_jit_takes_unhashable_aux_and_caches_by_equality():
    f = fg.jit(_loss)
    m = _layer([0.5, 1.0, 1.5])
    np.testing.assert_allclose(f(m), _loss(m), rtol=1e-6)
    f(_layer([1.0, 2.0, 3.0]))  # equal aux data: a cache hit
    assert f.trace_count == 1
    f(_layer([1.0, 2.0, 3.0], sizes=(2,)))  # other aux data: traced again
    assert f.trace_count == 2
    np.testing.assert_allclose(f(_layer([1.0, 1.0, 1.0], sizes=(2,))), 2 * 3 * np.sin(1.0),
                               rtol=1e-6)
    assert f.trace_count == 2
    out = fg.jit(lambda m: Layer(m.w * 2, m.meta))(m)
    assert out.meta == m.meta and np.allclose(out.w, [1.0, 2.0, 3.0])
    assert "sin" in f.lower(m).as_text()


def test_static_arguments_must_still_hash_as_in_jax():
    f = fg.jit(lambda x, opts: x * opts["k"], static_argnums=1)
    with pytest.raises(FuncgradTypeError, match="static argument `opts` has an unhashable"):
        f(1.0, {"k": 2})


def test_grad_vmap_jvp_and_compositions_with_unhashable_aux():
    m = _layer([0.5, 1.0, 1.5])
    want = 3 * np.cos(np.array([0.5, 1.0, 1.5], np.float32))
    for grad in (fg.grad(_loss), fg.grad(fg.jit(_loss)), fg.jit(fg.grad(_loss))):
        g = grad(m)
        assert g.meta == m.meta
        np.testing.assert_allclose(g.w, want, rtol=1e-6)
    batch = _layer(np.arange(6.0).reshape(2, 3))
    for f in (fg.vmap(_loss), fg.vmap(fg.jit(_loss)), fg.jit(fg.vmap(_loss))):
        np.testing.assert_allclose(f(batch), [_loss(_layer(r)) for r in batch.w], rtol=1e-6)
    out, tangent = fg.jvp(_loss, (m,), (_layer(np.ones(3)),))
    np.testing.assert_allclose(tangent, want.sum(), rtol=1e-6)
    per_row = fg.vmap(lambda r: Layer(r * 2, {"rows": [1]}))(fnp.ones((2, 3)))
    assert per_row.meta == {"rows": [1]} and per_row.w.shape == (2, 3)
