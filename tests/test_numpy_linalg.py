"""funcgrad.numpy products against NumPy: matmul/@ with 1-D operands and broadcast batch
axes, dot, inner, outer, vdot, vecdot, tensordot, kron, einsum (explicit and implicit
output, ellipses, diagonals, broadcasting, interleaved form) and linalg.norm.
"""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from numpy_strategies import F32, I32, assert_matches, make_array, seeds

import funcgrad.numpy as fnp

dims = st.integers(0, 4)


@st.composite
def matmul_shapes(draw):
    """Shapes (a, b) valid for np.matmul: 1-D or N-D with broadcastable batch axes."""
    n, k, m = draw(dims), draw(dims), draw(dims)
    (ba, bb), _ = draw(hnp.mutually_broadcastable_shapes(num_shapes=2, max_dims=2, max_side=3))
    a = (k,) if draw(st.booleans()) else ba + (n, k)
    b = (k,) if draw(st.booleans()) else bb + (k, m)
    return a, b


@given(shapes=matmul_shapes(), seed=seeds, dt=st.sampled_from([F32, I32]))
def test_matmul(shapes, seed, dt):
    a, b = make_array(seed, shapes[0], dt), make_array(seed + 1, shapes[1], dt)
    want = np.matmul(a, b).astype(dt)
    assert_matches(fnp.matmul(fnp.asarray(a), fnp.asarray(b)), want, dt, rtol=1e-4, atol=1e-4)
    assert_matches(fnp.asarray(a) @ fnp.asarray(b), want, dt, rtol=1e-4, atol=1e-4)
    assert_matches(a @ fnp.asarray(b), want, dt, rtol=1e-4, atol=1e-4)


@given(sa=hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=3), seed=seeds,
       data=st.data())
def test_dot_inner_tensordot(sa, seed, data):
    a = make_array(seed, sa, F32)
    # b's contracted axis matches a's last axis; other axes free
    k = sa[-1] if sa else 1
    extra = data.draw(hnp.array_shapes(min_dims=0, max_dims=2, min_side=0, max_side=3))
    if sa and data.draw(st.booleans()):
        sb = extra[:1] + (k,) + extra[1:] if extra else (k,)
    else:
        sb = extra
    b = make_array(seed + 1, sb, F32)
    if not sa or not sb or (len(sb) == 1 and sb[0] == k) or (len(sb) >= 2 and sb[-2] == k):
        assert_matches(fnp.dot(fnp.asarray(a), fnp.asarray(b)), np.dot(a, b), F32, rtol=1e-4,
                       atol=1e-5)
    b2 = make_array(seed + 2, extra + ((k,) if sa else ()), F32)
    assert_matches(fnp.inner(fnp.asarray(a), fnp.asarray(b2)), np.inner(a, b2), F32,
                   rtol=1e-4, atol=1e-5)
    n = data.draw(st.integers(0, min(len(sa), 2)))
    b3 = make_array(seed + 3, sa[len(sa) - n:] + extra, F32)
    assert_matches(fnp.tensordot(fnp.asarray(a), fnp.asarray(b3), n), np.tensordot(a, b3, n),
                   F32, rtol=1e-4, atol=1e-5)


def test_tensordot_axis_pairs_outer_vdot_vecdot_kron():
    a = make_array(0, (2, 3, 4), F32)
    b = make_array(1, (4, 3, 5), F32)
    assert_matches(fnp.tensordot(fnp.asarray(a), fnp.asarray(b), ((1, 2), (1, 0))),
                   np.tensordot(a, b, ((1, 2), (1, 0))), F32, rtol=1e-5)
    assert_matches(fnp.tensordot(fnp.asarray(a), fnp.asarray(b), (2, 0)),
                   np.tensordot(a, b, (2, 0)), F32, rtol=1e-5)
    assert_matches(fnp.outer(fnp.asarray(a[0]), fnp.asarray(b[0])), np.outer(a[0], b[0]), F32)
    assert_matches(fnp.vdot(fnp.asarray(a), fnp.asarray(a)), np.vdot(a, a), F32, rtol=1e-5)
    assert_matches(fnp.vecdot(fnp.asarray(a), fnp.asarray(a[0])), np.vecdot(a, a[0]), F32,
                   rtol=1e-5)
    x, y = np.arange(4).reshape(2, 2), np.arange(6).reshape(3, 2)
    assert_matches(fnp.kron(fnp.asarray(x), fnp.asarray(y)), np.kron(x, y), I32)
    assert_matches(fnp.kron(fnp.arange(3), fnp.asarray(y)), np.kron(np.arange(3), y), I32)


EINSUM = [
    ("ij,jk->ik", [(2, 3), (3, 4)]),
    ("ij,jk", [(2, 3), (3, 4)]),
    ("bij,bjk->bik", [(5, 2, 3), (5, 3, 4)]),
    ("...ij,...jk->...ik", [(5, 2, 3), (3, 4)]),
    ("...ij,jk", [(2, 5, 2, 3), (3, 4)]),
    ("ii->i", [(3, 3)]),
    ("ii", [(3, 3)]),
    ("iij->ji", [(3, 3, 2)]),
    ("ij->", [(2, 3)]),
    ("ij->ji", [(2, 3)]),
    ("i,i->", [(4,), (4,)]),
    ("i,j->ij", [(3,), (4,)]),
    ("i,j", [(3,), (4,)]),
    ("ijk,ikl,lm->jm", [(2, 3, 4), (2, 4, 5), (5, 2)]),
    ("ij,ij->ij", [(1, 3), (2, 3)]),
    ("ab,cd,bc->ad", [(2, 3), (4, 5), (3, 4)]),
    ("i...->...", [(2, 3, 4)]),
    ("i...", [(2, 3)]),
    ("Ba", [(2, 3)]),
    ("ijk,kj->i", [(2, 0, 3), (3, 0)]),
    ("i,i,i->i", [(3,), (3,), (3,)]),
    ("ij,j->i", [(3, 4), (4,)]),
    (" i j , j k -> i k ", [(2, 3), (3, 4)]),
    (",i->i", [(), (3,)]),
]


@pytest.mark.parametrize("spec,shapes", EINSUM, ids=[e[0] for e in EINSUM])
def test_einsum_matches_numpy(spec, shapes):
    xs = [make_array(i, s, F32) for i, s in enumerate(shapes)]
    got = fnp.einsum(spec, *[fnp.asarray(x) for x in xs])
    assert_matches(got, np.einsum(spec, *xs), F32, rtol=1e-4, atol=1e-5)


def test_einsum_interleaved_and_int():
    a, b = make_array(0, (2, 3), I32), make_array(1, (3, 4), I32)
    assert_matches(fnp.einsum(fnp.asarray(a), [0, 1], fnp.asarray(b), [1, 2], [0, 2]),
                   np.einsum(a, [0, 1], b, [1, 2], [0, 2]), I32)
    assert_matches(fnp.einsum(fnp.asarray(a), [Ellipsis, 1], fnp.asarray(b), [1, 2]),
                   np.einsum(a, [Ellipsis, 1], b, [1, 2]), I32)
    assert_matches(fnp.einsum("ij,jk->ik", fnp.asarray(a), fnp.asarray(b).astype(fnp.float32)),
                   a @ b, F32)


@given(x=hnp.arrays(np.float32, hnp.array_shapes(min_dims=1, max_dims=2, max_side=4),
                    elements=st.floats(-10, 10, width=32)),
       ord=st.sampled_from([None, 1, 2, np.inf, -np.inf, 0, 3]))
def test_norm(x, ord):
    if x.ndim == 2 and ord in (2, 0, 3):
        ord = "fro" if ord == 2 else None
    assert_matches(fnp.linalg.norm(fnp.asarray(x), ord), np.linalg.norm(x, ord), F32,
                   rtol=1e-4, atol=1e-5)
    if x.ndim == 2:
        for axis in (0, 1, -1):
            o = ord if ord not in ("fro",) else 2
            assert_matches(fnp.linalg.norm(fnp.asarray(x), o, axis=axis, keepdims=True),
                           np.linalg.norm(x, o, axis=axis, keepdims=True), F32, rtol=1e-4,
                           atol=1e-5)
