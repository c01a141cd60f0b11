"""lax.Precision: JAX's members and string aliases, accepted (and validated) by dot_general,
dot, matmul, einsum, tensordot and conv, eagerly, under jit, grad and vmap."""

import numpy as np
import pytest

import funcgrad as fg
import funcgrad.numpy as fnp
from funcgrad import errors, lax

A = np.arange(6.0, dtype=np.float32).reshape(2, 3)
B = np.arange(6.0, dtype=np.float32).reshape(3, 2) - 2.0

VALID = [None, lax.Precision.DEFAULT, lax.Precision.HIGH, lax.Precision.HIGHEST, "default",
         "high", "highest", "bfloat16", "tensorfloat32", "float32",
         ("high", lax.Precision.HIGHEST)]
PRODUCTS = {
    "dot_general": lambda a, b, p: lax.dot_general(a, b, (((1,), (0,)), ((), ())), p),
    "lax.dot": lambda a, b, p: lax.dot(a, b, precision=p),
    "matmul": lambda a, b, p: fnp.matmul(a, b, precision=p),
    "dot": lambda a, b, p: fnp.dot(a, b, precision=p),
    "einsum": lambda a, b, p: fnp.einsum("ij,jk->ik", a, b, precision=p),
    "tensordot": lambda a, b, p: fnp.tensordot(a, b, 1, precision=p),
}


def test_members_and_aliases_are_jaxs():
    P = lax.Precision
    assert [p.name for p in P] == ["DEFAULT", "HIGH", "HIGHEST"]
    assert P("bfloat16") is P.DEFAULT and P("tensorfloat32") is P.HIGH
    assert P("float32") is P.HIGHEST and P("HIGHEST") is P.HIGHEST and str(P.HIGH) == "HIGH"


@pytest.mark.parametrize("name", sorted(PRODUCTS))
@pytest.mark.parametrize("precision", VALID, ids=str)
def test_products_accept_every_precision(name, precision):
    f = PRODUCTS[name]
    np.testing.assert_allclose(np.asarray(f(A, B, precision)), A @ B, rtol=1e-6)


def test_precision_under_jit_grad_vmap_and_in_the_ir():
    f = lambda a: fnp.sum(fnp.matmul(a, B, precision=lax.Precision.HIGHEST) ** 2)
    np.testing.assert_allclose(np.asarray(fg.jit(f)(A)), np.sum((A @ B) ** 2), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(fg.grad(f)(A)), 2 * (A @ B) @ B.T, rtol=1e-5)
    got = fg.vmap(lambda r: fnp.dot(r, B, precision="highest"))(A)
    np.testing.assert_allclose(np.asarray(got), A @ B, rtol=1e-6)
    text = str(fg.make_jaxpr(lambda a: lax.dot(a, B, precision="float32"))(A))
    assert "precision=HIGHEST" in text
    out = lax.conv_general_dilated(np.ones((1, 1, 4, 4), np.float32), np.ones((1, 1, 3, 3),
                                   np.float32), (1, 1), "VALID", precision=lax.Precision.HIGH)
    np.testing.assert_allclose(np.asarray(out), np.full((1, 1, 2, 2), 9.0))


@pytest.mark.parametrize("bad,cls", [("fastest", errors.FuncgradValueError),
                                     (3, errors.FuncgradTypeError),
                                     (("high",), errors.FuncgradTypeError)])
def test_bad_precision_is_an_error_naming_the_operation(bad, cls):
    with pytest.raises(cls, match="dot_general: .*precision"):
        fnp.matmul(A, B, precision=bad)
    with pytest.raises(cls, match="conv_general_dilated: .*precision"):
        lax.conv(np.ones((1, 1, 3, 3), np.float32), np.ones((1, 1, 2, 2), np.float32), (1, 1),
                 "VALID", precision=bad)
