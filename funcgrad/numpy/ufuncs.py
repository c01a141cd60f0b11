"""`ufunc` objects as JAX's (`jnp.ufunc`, `jnp.frompyfunc`): a scalar function with NumPy's
`reduce`, `accumulate`, `at`, `reduceat` and `outer`.

The methods of the generic ufunc are scans over the reduced axis (no associativity is
assumed), `at` a scan over the addressed positions (repeats apply in order); the ufuncs JAX
has (add, multiply, maximum, ...) use funcgrad.numpy's reductions, cumulative reductions and
`x.at[]` updates instead. funcgrad.numpy's functions of those names stay plain functions,
with these methods attached (`fnp.add.reduce`, `fnp.maximum.at`, ...). Imports sibling
numpy modules and lax.
"""

import numpy as np

from funcgrad import errors, lax
from funcgrad.numpy._util import asarray_operand, canonical_axis, shape_of

__all__ = ["frompyfunc", "ufunc"]


def _no(name, what, value):
    if value is not None:
        raise errors.op_error(name, f"the {what} argument is not supported (arrays are "
                              "immutable)", cls=errors.FuncgradValueError)


class ufunc:  # noqa: N801  (NumPy's and JAX's name)
    """A universal function: `func` elementwise over broadcast arrays (`nin` inputs, `nout`
    outputs), with NumPy's methods for binary ones (`reduce`, `accumulate`, `at`,
    `reduceat`, `outer`). `call`, `reduce`, `accumulate`, `at`, `reduceat` optionally give
    faster implementations; `identity` is the reduction's starting value.

    Example:
        >>> u = fnp.ufunc(lambda a, b: a * b + 1, 2, 1)
        >>> u.accumulate(fnp.array([1.0, 2.0, 3.0]))
        Array([ 1.,  3., 10.], dtype=float32)
    """

    def __init__(self, func, /, nin, nout, *, name=None, nargs=None, identity=None,
                 call=None, reduce=None, accumulate=None, at=None, reduceat=None):
        self._func = func
        self.nin, self.nout = int(nin), int(nout)
        self.nargs = self.nin if nargs is None else int(nargs)
        self.identity = identity
        self.__name__ = name or getattr(func, "__name__", "ufunc")
        self._call, self._reduce, self._accumulate = call, reduce, accumulate
        self._at, self._reduceat = at, reduceat

    def __repr__(self):
        return f"<funcgrad.numpy.ufunc '{self.__name__}'>"

    def __call__(self, *args, out=None, where=None):
        _no(self.__name__, "out", out)
        _no(self.__name__, "where", where)
        if len(args) != self.nin:
            raise errors.op_error(self.__name__, f"takes {self.nin} arguments, got "
                                  f"{len(args)}", cls=errors.FuncgradTypeError)
        if self._call is not None:
            return self._call(*args)
        from funcgrad.numpy.functional import vectorize
        return vectorize(self._func)(*args)

    def _binary(self, method):
        if self.nin != 2 or self.nout != 1:
            raise errors.op_error(f"{self.__name__}.{method}", "only binary ufuncs with one "
                                  "output have this method", cls=errors.FuncgradValueError)

    def reduce(self, a, axis=0, dtype=None, out=None, keepdims=False, initial=None,
               where=None):
        """`a` folded with the ufunc along `axis` (from `initial`, else `identity`, else the
        first entry).

        Example:
            >>> fnp.add.reduce(fnp.array([[1, 2], [3, 4]]), axis=1)
            Array([3, 7], dtype=int32)
        """
        self._binary("reduce")
        _no(f"{self.__name__}.reduce", "out", out)
        if self._reduce is not None:
            return self._reduce(a, axis=axis, dtype=dtype, keepdims=keepdims, initial=initial,
                                where=where)
        if where is not None:
            raise errors.op_error(f"{self.__name__}.reduce", "where= needs a ufunc with a "
                                  "reduction of its own", cls=errors.FuncgradValueError)
        a = asarray_operand(self.__name__, a)
        if dtype is not None:
            a = a.astype(dtype)
        if axis is None:
            a, ax, kept = a.reshape(-1), 0, tuple(1 for _ in shape_of(a))
        elif isinstance(axis, (tuple, list)):
            raise errors.op_error(f"{self.__name__}.reduce", "a reduction over several axes "
                                  "needs a reorderable ufunc", cls=errors.FuncgradValueError)
        else:
            ax = canonical_axis(f"{self.__name__}.reduce", axis, len(shape_of(a)))
            kept = None
        x = _front(a, ax)
        start = initial if initial is not None else self.identity
        if start is None:
            if not shape_of(x)[0]:
                raise errors.op_error(f"{self.__name__}.reduce", "zero-size reduction without "
                                      "an identity", cls=errors.FuncgradValueError)
            carry, x = x[0], x[1:]
        else:
            carry = _full_as(start, x[0])
        res = lax.scan(lambda c, v: (self._func(c, v), None), carry, x)[0]
        if keepdims:
            res = res.reshape(kept) if kept is not None else _expand(res, ax)
        return res

    def accumulate(self, a, axis=0, dtype=None, out=None):
        """The running folds of `a` along `axis` (the first entry as it is).

        Example:
            >>> fnp.maximum.accumulate(fnp.array([1.0, 3.0, 2.0]))
            Array([1., 3., 3.], dtype=float32)
        """
        self._binary("accumulate")
        _no(f"{self.__name__}.accumulate", "out", out)
        if self._accumulate is not None:
            return self._accumulate(a, axis=axis, dtype=dtype)
        a = asarray_operand(self.__name__, a)
        if dtype is not None:
            a = a.astype(dtype)
        ax = canonical_axis(f"{self.__name__}.accumulate", axis, len(shape_of(a)))
        x = _front(a, ax)

        def step(c, v):
            c = self._func(c, v)
            return c, c
        _, rest = lax.scan(step, x[0], x[1:])
        from funcgrad.numpy.shape import concatenate, moveaxis
        return moveaxis(concatenate([x[:1], rest.astype(x.dtype)], 0), 0, ax)

    def at(self, a, indices, b=None, /, *, inplace=True):
        """`a` with the ufunc applied at `indices` (with `b`), once per index: repeated
        indices apply again. Needs `inplace=False` (arrays are immutable).

        Example:
            >>> fnp.add.at(fnp.zeros(3), fnp.array([0, 0, 2]), 1.0, inplace=False)
            Array([2., 0., 1.], dtype=float32)
        """
        if inplace:
            raise errors.op_error(f"{self.__name__}.at", "funcgrad arrays are immutable: it "
                                  "cannot update in place", cls=errors.FuncgradValueError,
                                  hint="pass inplace=False and use the result")
        if self._at is not None:
            return self._at(a, indices, b)
        a = asarray_operand(self.__name__, a)
        from funcgrad.numpy.creation import arange
        pos = arange(a.size).reshape(shape_of(a))[indices]
        flat = a.reshape(-1)
        if self.nin == 1:
            vals = None
        else:
            vals = asarray_operand(self.__name__, b)
            from funcgrad.numpy.shape import broadcast_to
            vals = broadcast_to(vals, shape_of(pos)).reshape(-1)

        def step(x, iv):
            i, v = iv
            old = lax.dynamic_index_in_dim(x, i, 0, keepdims=False)
            new = self._func(old) if v is None else self._func(old, v)
            return lax.dynamic_update_index_in_dim(x, new.astype(x.dtype), i, 0), None
        xs = (pos.reshape(-1), vals) if vals is not None else (pos.reshape(-1), None)
        return lax.scan(step, flat, xs)[0].reshape(shape_of(a))

    def reduceat(self, a, indices, axis=0, dtype=None, out=None):
        """Reductions over the slices between consecutive `indices` along `axis` (NumPy's
        rule: a single entry where an index does not grow).

        Example:
            >>> fnp.add.reduceat(fnp.arange(8.0), fnp.array([0, 4, 1, 5]))
            Array([ 6.,  4., 10., 18.], dtype=float32)
        """
        self._binary("reduceat")
        _no(f"{self.__name__}.reduceat", "out", out)
        if self._reduceat is not None:
            return self._reduceat(a, indices, axis=axis, dtype=dtype)
        from funcgrad.numpy.indexing import take
        from funcgrad.numpy.logic import where
        from funcgrad.numpy.shape import concatenate, moveaxis
        a = asarray_operand(self.__name__, a)
        if dtype is not None:
            a = a.astype(dtype)
        ax = canonical_axis(f"{self.__name__}.reduceat", axis, len(shape_of(a)))
        x = _front(a, ax)
        n = shape_of(x)[0]
        idx = asarray_operand(self.__name__, indices).reshape(-1)
        ends = concatenate([idx[1:], lax.full((1,), n, idx.dtype)])
        lead = (-1,) + (1,) * (x.ndim - 1)
        lo, hi = idx.reshape(lead), ends.reshape(lead)

        def step(i, out):  # JAX's loop: entry i joins every segment (start, end) around it
            row = lax.dynamic_index_in_dim(x, i, 0)
            return where((i > lo) & (i < hi), self._func(out, row).astype(out.dtype), out)
        return moveaxis(lax.fori_loop(0, n, step, take(x, idx, axis=0)), 0, ax)

    def outer(self, A, B, /, **kwargs):  # noqa: N803
        """The ufunc on every pair: `func(A[i..., None...], B[..., j...])`.

        Example:
            >>> fnp.multiply.outer(fnp.array([1, 2]), fnp.array([1, 10]))
            Array([[ 1, 10],
                   [ 2, 20]], dtype=int32)
        """
        self._binary("outer")
        A, B = asarray_operand(self.__name__, A), asarray_operand(self.__name__, B)
        return self(A.reshape(shape_of(A) + (1,) * len(shape_of(B))), B, **kwargs)


def _front(a, ax):
    from funcgrad.numpy.shape import moveaxis
    return moveaxis(a, ax, 0) if ax else a


def _expand(res, ax):
    from funcgrad.numpy.shape import expand_dims
    return expand_dims(res, ax)


def _full_as(value, like):
    from funcgrad.numpy.creation import full_like
    return full_like(like, value)


def frompyfunc(func, /, nin, nout, *, identity=None):
    """A `ufunc` of the scalar function `func` (vectorized with `vmap`).

    Example:
        >>> f = fnp.frompyfunc(lambda a, b: a * b + 1, 2, 1, identity=0)
        >>> f(fnp.arange(3.0), 2.0)
        Array([1., 3., 5.], dtype=float32)
    """
    return ufunc(func, nin, nout, identity=identity)


# --- the methods of funcgrad.numpy's ufuncs (JAX's list) --------------------------------------
def _table(fnp):
    """name -> (identity, reduce, accumulate, the `x.at[]` update of `at`)."""
    neg_inf = -np.inf
    return {
        "add": (0, fnp.sum, fnp.cumsum, "add"),
        "multiply": (1, fnp.prod, fnp.cumprod, "multiply"),
        "maximum": (None, fnp.max, None, "max"),
        "minimum": (None, fnp.min, None, "min"),
        "logical_and": (True, fnp.all, None, None),
        "logical_or": (False, fnp.any, None, None),
        "logical_xor": (False, None, None, None),
        "bitwise_and": (-1, None, None, None),
        "bitwise_or": (0, None, None, None),
        "bitwise_xor": (0, None, None, None),
        "logaddexp": (neg_inf, None, None, None),
        "logaddexp2": (neg_inf, None, None, None),
        "subtract": (None, None, None, None),
        "negative": (None, None, None, None),
    }


def install(namespace):
    """Attach the ufunc methods to funcgrad.numpy's functions of JAX's ufunc names."""
    import funcgrad.numpy as fnp
    for name, (identity, reduce, accumulate, at_name) in _table(fnp).items():
        fn = namespace[name]
        nin = 1 if name == "negative" else 2
        at = None
        if at_name is not None:
            def at(a, indices, b, _op=at_name, _name=name):
                return getattr(asarray_operand(_name, a).at[indices], _op)(b)
        u = ufunc(fn, nin, 1, name=name, identity=identity, call=fn,
                  reduce=_keyword_reduce(reduce), accumulate=_keyword_accumulate(accumulate),
                  at=at)
        for attr in ("nin", "nout", "nargs", "identity", "reduce", "accumulate", "at",
                     "reduceat", "outer"):
            setattr(fn, attr, getattr(u, attr))


def _keyword_reduce(fn):
    if fn is None:
        return None

    def reduce(a, axis=0, dtype=None, keepdims=False, initial=None, where=None):
        kw = {"keepdims": keepdims, "initial": initial, "where": where}
        if dtype is not None:
            kw["dtype"] = dtype
        return fn(a, axis=axis, **{k: v for k, v in kw.items() if v is not None or k ==
                                   "keepdims"})
    return reduce


def _keyword_accumulate(fn):
    if fn is None:
        return None
    return lambda a, axis=0, dtype=None: fn(a, axis=axis, dtype=dtype)
