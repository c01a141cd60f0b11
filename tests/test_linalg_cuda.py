"""The CUDA backend's linear-algebra library calls (`backends/cuda/linalg.py`) without a GPU:
each entry run with numpy as its array module against the eager primitive (NaN for rejected
matrices included), and `jit(backend="cuda")` programs through the CPU emulation of the
CUDA runtime against eager results (that part needs a host C++ compiler, as every emulation
test does; the direct checks above it need nothing).
"""

import numpy as np
import pytest
from test_linalg_lax import close, distinct_symmetric, spd, well_conditioned

import funcgrad as fg
import funcgrad.numpy as fnp
from funcgrad.backends.cuda import emulate, program, runtime
from funcgrad.backends.cuda import linalg as cuda_linalg
from funcgrad.lax import linalg as L

R = np.random.default_rng(0)
TRI = np.tril(well_conditioned(R, (2,), 3))
CASES = {  # primitive name: (params, operands)
    "cholesky": ({}, [spd(R, (2,), 3)]),
    "triangular_solve": (dict(left_side=True, lower=True, transpose_a=True, conjugate_a=False,
                              unit_diagonal=False), [TRI, R.standard_normal((2, 3, 2))]),
    "triangular_solve_right": (dict(left_side=False, lower=False, transpose_a=False,
                                    conjugate_a=False, unit_diagonal=True),
                               [np.swapaxes(TRI, -1, -2), R.standard_normal((2, 4, 3))]),
    "lu": ({}, [R.standard_normal((2, 3, 4))]),
    "qr": (dict(full_matrices=False), [R.standard_normal((2, 4, 3))]),
    "eigh": (dict(lower=True), [distinct_symmetric(R, (2,), 3)]),
    "svd": (dict(full_matrices=True, compute_uv=True), [R.standard_normal((2, 3, 4))]),
    "svd_values": (dict(full_matrices=False, compute_uv=False), [R.standard_normal((2, 3, 4))]),
}


def _prim(name):
    return getattr(L, name.split("_right")[0].split("_values")[0] + "_p")


@pytest.mark.parametrize("name", sorted(CASES))
def test_library_entries_match_the_eager_primitive(name):
    params, ops = CASES[name]
    prim = _prim(name)
    ops = [o.astype(np.float32) for o in ops]
    got = cuda_linalg.LIBRARY[prim.name](np, *ops, **params)
    want = prim.bind(*[fnp.asarray(o) for o in ops], **params)
    got = got if prim.multiple_results else [got]
    want = want if prim.multiple_results else [want]
    for g, w in zip(got, want):
        close(np.abs(g), np.abs(np.asarray(w)), 1e-4)  # qr/svd/eigh: equal up to signs


def test_rejected_matrices_give_nan():
    bad = np.stack([np.eye(2), -np.eye(2)]).astype(np.float32)
    chol = cuda_linalg.LIBRARY["cholesky"](np, bad)
    close(chol[0], np.eye(2))
    assert np.isnan(chol[1]).all()
    assert np.isnan(cuda_linalg.LIBRARY["cholesky"](np, -bad[:1])).all()
    x = cuda_linalg.LIBRARY["triangular_solve"](
        np, np.zeros((2, 2), np.float32), np.ones((2, 1), np.float32), left_side=True,
        lower=True, transpose_a=False, conjugate_a=False, unit_diagonal=False)
    assert not np.isfinite(x).any()
    assert cuda_linalg.LIBRARY["cholesky"](np, np.eye(2, dtype=np.float16)).dtype == np.float32


def test_every_decomposition_has_a_cuda_entry():
    assert {p.name for p in (L.cholesky_p, L.triangular_solve_p, L.lu_p, L.qr_p, L.eigh_p,
                             L.svd_p)} <= set(runtime.LIBRARY)


@pytest.fixture
def emulated(monkeypatch):
    if emulate.compiler() is None:
        pytest.skip("no host C++ compiler for the CUDA emulation (checked directly above)")
    old = program.set_runtime(emulate.EmulatedRuntime())
    yield
    program.set_runtime(old)


def test_jit_on_the_cuda_backend_matches_eager(emulated):
    a = fnp.asarray(well_conditioned(np.random.default_rng(1), (2,), 3).astype(np.float32))

    def f(a):
        s = a @ fnp.swapaxes(a, -1, -2)
        return (fnp.linalg.cholesky(s), fnp.linalg.solve(a, a), fnp.linalg.det(a),
                fnp.linalg.svd(a, compute_uv=False), fnp.linalg.eigvalsh(s),
                fnp.abs(fnp.linalg.qr(a).R))
    for g, e in zip(fg.jit(f, backend="cuda")(a), f(a)):
        close(g, np.asarray(e), 1e-4)
