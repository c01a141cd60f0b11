"""Bugs found while building funcgrad, each pinned by the smallest program that showed it."""

import numpy as np

import funcgrad as fg
import funcgrad.numpy as fnp
from funcgrad import lax
from funcgrad.test_util import check_grads


def test_shift_by_a_literal_amount_under_jit():
    a = fnp.arange(5).astype(fnp.uint32)
    for shift, ref in [(lax.shift_left, np.left_shift), (lax.shift_right_logical, np.right_shift)]:
        got = fg.jit(lambda a, shift=shift: shift(a, np.uint32(3)))(a)
        np.testing.assert_array_equal(got, ref(np.arange(5, dtype=np.uint32), 3))


def test_large_iota_under_jit():
    got = fg.jit(lambda x: lax.iota(np.int32, 100000) + x)(fnp.int32(1))
    np.testing.assert_array_equal(got, np.arange(100000) + 1)


def test_vmap_of_where_over_scalars():
    xs = fnp.array([1.0, -1.0, 2.0])
    np.testing.assert_array_equal(fg.vmap(lambda v: fnp.where(v > 0, 1.0, 0.0))(xs), [1, 0, 1])
    relu_grad = fg.vmap(fg.grad(lambda v: fnp.where(v > 0, v, 0.0)))(xs)
    np.testing.assert_array_equal(relu_grad, [1, 0, 1])
    got = fg.vmap(lambda v, w: fnp.where(w > 0, v, 0.0), in_axes=(None, 0))(fnp.ones(2), xs)
    np.testing.assert_array_equal(got, [[1, 1], [0, 0], [1, 1]])


def test_logaddexp_gradient_at_a_tie_and_higher_orders():
    assert float(fg.grad(lambda x: fnp.logaddexp(x, 0.0))(0.0)) == 0.5
    check_grads(fnp.logaddexp, (fnp.array([0.0, 1.0, -2.0]), fnp.array([0.0, -1.0, 3.0])),
                order=2)
    assert float(fnp.logaddexp(-np.inf, -np.inf)) == -np.inf


def test_higher_order_impl_under_a_define_by_run_trace_does_not_record_into_it():
    # a jitted call evaluated eagerly while grad's trace is current must run, not record
    f = fg.jit(lambda x: fnp.sin(x) * 2.0)
    np.testing.assert_allclose(fg.grad(lambda x: f(x).sum())(fnp.ones(3)), 2 * np.cos(1.0) *
                               np.ones(3), rtol=1e-6)


def test_chunked_reduction_of_a_column_broadcast_along_the_rows():
    # a fused reduction whose input is a column broadcast across a large iteration space
    # (the VJP of a row-wise broadcast gives one): the row-chunked loop reduced the column's
    # (rows, 1) chunk as it was, so summing over the columns silently lost the factor 1024
    # and reducing over the rows raised inside the generated code
    v = np.arange(4096, dtype=np.float32) / 4096
    wide = np.broadcast_to(v[:, None] * np.float32(2), (4096, 1024))
    for axis in (0, 1, None):
        for fn in (fnp.sum, fnp.max, fnp.min):
            f = fg.jit(lambda v, fn=fn, axis=axis: fn(
                fnp.broadcast_to(v[:, None], (4096, 1024)) * 2.0, axis=axis), backend="numpy")
            assert "for r in range(" in f.lower(v).compile().as_text()  # the chunked loop
            want = getattr(np, fn.__name__)(wide.astype(np.float64), axis=axis)
            np.testing.assert_allclose(np.asarray(f(v)), want, rtol=1e-6,
                                       err_msg=f"{fn.__name__} axis={axis}")


def test_eager_arithmetic_on_infinities_gives_ieee_results_without_warnings():
    # inf - inf inside a sum, a cumulative sum, a product, a scatter-add, a window sum and
    # the tangent sum of autodiff: nan, as under jit and in XLA, and no RuntimeWarning (under
    # `-W error` numpy's warning surfaced as "this is a funcgrad bug")
    import warnings
    x = np.array([np.inf, -np.inf, 1.0], np.float32)
    m = np.array([[np.inf, 1.0], [-np.inf, 2.0]], np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        np.testing.assert_array_equal(fnp.sum(fnp.array(x)), np.float32(np.nan))
        np.testing.assert_array_equal(fnp.cumsum(fnp.array(x)), [np.inf, np.nan, np.nan])
        np.testing.assert_array_equal(fnp.array(m) @ fnp.array(m),
                                      [[np.nan, np.inf], [-np.inf, -np.inf]])
        np.testing.assert_array_equal(
            fnp.zeros(2).at[np.array([0, 0])].add(fnp.array(x[:2])), [np.nan, 0.0])
        np.testing.assert_array_equal(
            lax.reduce_window(fnp.array(x), 0.0, lax.add, (2,), (1,), "VALID"),
            [np.nan, -np.inf])
        from funcgrad.interpreters import ad
        np.testing.assert_array_equal(
            ad.add_any_p.bind(fnp.array(x[:1]), fnp.array(x[1:2])), [np.nan])


def test_the_var_method_under_every_transform():
    # a tracer kept its IR variable in an attribute named `var`, which hid the numpy method:
    # `x.var()` under jit raised "'Var' object is not callable"
    x = fnp.arange(4.0)
    np.testing.assert_allclose(fg.jit(lambda x: x.var())(x), 1.25)
    np.testing.assert_allclose(fg.grad(lambda x: x.var())(x), [-0.75, -0.25, 0.25, 0.75])
    np.testing.assert_allclose(fg.vmap(lambda r: r.var(ddof=1))(fnp.arange(6.0).reshape(2, 3)),
                               [1.0, 1.0])
    xs = np.arange(4.0)  # d std / dx = (x - mean) / (n std)
    np.testing.assert_allclose(fg.jit(fg.grad(lambda x: x.std()))(x),
                               (xs - xs.mean()) / (xs.size * xs.std()), rtol=1e-6)
