"""Random programs through the whole compiler: compiled == eager `eval_jaxpr` == numpy,
with kernels rendered plainly and as chunked loops (forced on the small test arrays), and
on the native backend (kernels in C, when a C compiler is found) == the numpy backend.

Hypothesis draws a recipe (a list of steps over a growing pool of values) that the same
interpreter runs with `funcgrad.numpy` (traced, then compiled and evaluated eagerly) and
with NumPy (the reference). Steps: elementwise ops, broadcasting, reductions, reshapes,
transposes, matmuls, slicing and selects; a second test compiles the gradient of such a
program, which exercises the IR that autodiff produces (transposed products, pads...).
"""

import contextlib

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import funcgrad as fg
import funcgrad.numpy as fnp
from funcgrad import lax
from funcgrad.backends.native import build as native_build
from funcgrad.backends.numpy import chunked
from funcgrad.compiler import pipeline
from funcgrad.core import eval_jaxpr

SHAPES = [(3, 4), (2, 3, 4), (5,), (4, 1, 3), (1, 6), (2, 2, 2, 3), (4, 4), (3, 3, 3)]
OPS = ["unary", "binary", "scalar", "reduce", "reshape", "transpose", "matmul", "slice",
       "broadcast", "where", "reverse", "mirror"]
UNARY = [
    lambda m, x: m.sin(x), lambda m, x: m.tanh(x), lambda m, x: -x, lambda m, x: m.abs(x),
    lambda m, x: m.exp(m.tanh(x)), lambda m, x: m.log1p(m.abs(x)),
    lambda m, x: m.sqrt(m.abs(x)), lambda m, x: m.maximum(x, 0.0), lambda m, x: x * x,
]
BINARY = [
    lambda m, x, y: x + y, lambda m, x, y: x - y, lambda m, x, y: x * y,
    lambda m, x, y: m.maximum(x, y), lambda m, x, y: m.minimum(x, y),
    lambda m, x, y: x / (1.0 + y * y),
]


def _broadcastable(a, b):
    try:
        np.broadcast_shapes(a.shape, b.shape)
        return True
    except ValueError:
        return False


def _step(m, pool, op, i, j, k):
    x, y = pool[i % len(pool)], pool[j % len(pool)]
    if op == "binary" and _broadcastable(x, y):
        return BINARY[k % len(BINARY)](m, x, y)
    if op == "where" and _broadcastable(x, y):
        return m.where(x > y, x, y * 0.5)
    if op == "scalar":
        return x * (0.5 + k) - 0.25 * k
    if op == "reduce" and x.ndim:
        fn = [m.sum, m.max, m.min][k % 3]
        return fn(x, axis=k % x.ndim, keepdims=bool(k & 4))
    if op == "reshape" and x.ndim >= 2:
        return x.reshape(-1) if k % 2 else x.reshape((-1,) + x.shape[-1:])
    if op == "reshape":
        return x.reshape(x.shape + (1,))
    if op == "transpose" and x.ndim >= 2:
        return m.swapaxes(x, 0, -1) if k % 2 else x.T
    yy = y
    while yy.ndim > 2:  # a matrix (or vector) right operand
        yy = yy[0]
    if op == "matmul" and x.ndim >= 1 and yy.ndim >= 1 and x.shape[-1] == yy.shape[0]:
        return m.matmul(x, yy)
    if op == "matmul" and x.ndim >= 2:
        return m.matmul(x, m.swapaxes(x, -1, -2))
    if op == "slice" and x.ndim and x.shape[0] > 1:
        return x[1:] if k % 2 else x[::2]
    if op == "broadcast":
        return m.broadcast_to(x, (2,) + x.shape)
    if op == "reverse" and x.ndim:  # a reversed view of an intermediate or an input
        return x[::-1] if k % 2 or x.ndim == 1 else x[::-1, ::-1]
    if op == "mirror" and x.ndim:  # x combined with a reordered view of itself: aliasing
        other = x[::-1] if x.ndim == 1 or k % 3 == 0 else (x.T if k % 3 == 1 else
                                                             m.swapaxes(x, 0, -1))
        if other.shape == x.shape:
            return (x + other) / 2.0 if k % 2 else x - other * 0.5
    return UNARY[k % len(UNARY)](m, x)


def run_recipe(m, recipe, inputs):
    pool = list(inputs)
    for op, i, j, k in recipe:
        pool.append(_step(m, pool, op, i, j, k))
    picks = {len(pool) - 1, len(pool) // 2 + recipe[0][1] % max(1, len(pool) // 2)}
    return tuple(pool[p] for p in sorted(picks) if p < len(pool))


recipes = st.lists(st.tuples(st.sampled_from(OPS), st.integers(0, 63), st.integers(0, 63),
                             st.integers(0, 7)), min_size=1, max_size=12)


def _inputs(shape, seed):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=shape).astype(np.float32)
    y = rng.normal(size=shape).astype(np.float32)
    v = rng.normal(size=shape[-1:]).astype(np.float32)
    return x, y, v


@contextlib.contextmanager
def tiny_chunks():
    """Chunk every kernel with more than a few rows (normally only large ones are)."""
    saved = chunked.CHUNK_ELEMENTS, chunked.MIN_CHUNKS
    chunked.CHUNK_ELEMENTS, chunked.MIN_CHUNKS = 3, 1
    try:
        yield
    finally:
        chunked.CHUNK_ELEMENTS, chunked.MIN_CHUNKS = saved


def compiled_both_ways(closed, inputs, donate_argnums=()):
    """Results of the compiled program, rendered plainly and as chunked loops (donated
    arguments get fresh copies each time, so the caller's stay intact)."""
    fresh = lambda: [np.array(x, copy=True) for x in inputs]
    plain = pipeline.compile_jaxpr(closed, donate_argnums=donate_argnums)(*fresh())
    with tiny_chunks():
        exe = pipeline.compile_jaxpr(closed, donate_argnums=donate_argnums)
    return plain, exe(*fresh())


@contextlib.contextmanager
def native_sync():
    saved = fg.config.native
    fg.config.update("native", "sync")
    try:
        yield
    finally:
        fg.config.update("native", saved)


def native_results(closed, inputs, donate_argnums=()):
    """Results of the program on the native backend (kernels in C)."""
    with native_sync():
        exe = pipeline.compile_jaxpr(closed, donate_argnums=donate_argnums)
    return exe(*[np.array(x, copy=True) for x in inputs])


def _close(a, b, rtol, atol):
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape and a.dtype == b.dtype, (a.shape, a.dtype, b.shape, b.dtype)
    np.testing.assert_allclose(a, b, rtol=rtol, atol=atol, equal_nan=True)


donations = st.sampled_from([(), (0,), (0, 1), (0, 1, 2)])


@given(recipe=recipes, shape=st.sampled_from(SHAPES), seed=st.integers(0, 2**16),
       donate=donations)
def test_random_programs_compile_to_the_same_results(recipe, shape, seed, donate):
    inputs = _inputs(shape, seed)
    closed = fg.make_jaxpr(lambda *a: run_recipe(fnp, recipe, a))(*inputs)
    eager = eval_jaxpr(closed.jaxpr, closed.consts, *inputs)
    compiled, in_chunks = compiled_both_ways(closed, inputs, donate)
    reference = run_recipe(np, recipe, inputs)
    assert len(compiled) == len(in_chunks) == len(eager) == len(reference)
    for c, k, e, r in zip(compiled, in_chunks, eager, reference):
        assert isinstance(c, np.ndarray) and isinstance(k, np.ndarray)
        _close(c, e, rtol=2e-5, atol=1e-5)
        _close(k, e, rtol=2e-5, atol=1e-5)
        _close(c, np.asarray(r, np.float32), rtol=1e-4, atol=1e-4)


@given(recipe=recipes, shape=st.sampled_from(SHAPES), seed=st.integers(0, 2**16))
def test_gradients_of_random_programs_compile_to_the_same_results(recipe, shape, seed):
    inputs = _inputs(shape, seed)

    def loss(x, y, v):
        return sum(fnp.sum(fnp.tanh(o)) for o in run_recipe(fnp, recipe, (x, y, v)))
    closed = fg.make_jaxpr(fg.grad(loss, argnums=(0, 2)))(*inputs)
    eager = eval_jaxpr(closed.jaxpr, closed.consts, *inputs)
    compiled, in_chunks = compiled_both_ways(closed, inputs)
    for c, k, e in zip(compiled, in_chunks, eager):
        _close(c, e, rtol=1e-4, atol=1e-5)
        _close(k, e, rtol=1e-4, atol=1e-5)


needs_cc = pytest.mark.skipif(native_build.compiler() is None,
                              reason="no C compiler (test_native_backend checks that)")


@needs_cc
@settings(max_examples=12)
@given(recipe=recipes, shape=st.sampled_from(SHAPES), seed=st.integers(0, 2**16),
       donate=donations)
def test_random_programs_give_the_same_results_on_the_native_backend(recipe, shape, seed,
                                                                      donate):
    inputs = _inputs(shape, seed)
    closed = fg.make_jaxpr(lambda *a: run_recipe(fnp, recipe, a))(*inputs)
    want = pipeline.compile_jaxpr(closed, backend="numpy")(*inputs)
    got = native_results(closed, inputs, donate)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert isinstance(g, np.ndarray)
        _close(g, w, rtol=2e-6, atol=2e-6)


@needs_cc
@settings(max_examples=8)
@given(recipe=recipes, shape=st.sampled_from(SHAPES), seed=st.integers(0, 2**16))
def test_gradients_of_random_programs_on_the_native_backend(recipe, shape, seed):
    inputs = _inputs(shape, seed)

    def loss(x, y, v):
        return sum(fnp.sum(fnp.tanh(o)) for o in run_recipe(fnp, recipe, (x, y, v)))
    closed = fg.make_jaxpr(fg.grad(loss, argnums=(0, 2)))(*inputs)
    want = pipeline.compile_jaxpr(closed, backend="numpy")(*inputs)
    for g, w in zip(native_results(closed, inputs), want):
        # float32 sums in another order, and libm results a few ulp apart: a saturated tanh's
        # derivative 1 - t*t turns one ulp of t into ~1e-7 absolute, times the chain's
        # factors (tanh(4.5 * (5.5 x - 1.25) - 1): 3e-6), so absolute errors scale with the
        # largest term
        _close(g, w, rtol=2e-5, atol=2e-5 * max(1.0, float(np.max(np.abs(w), initial=0))))


# Above the real chunking threshold (no tiny chunks): an output written chunk by chunk into
# the buffer of an operand that the same loop also reads transposed or reversed.
ALIASING = {
    "y + y.T": lambda m, a: (lambda y: (y + y.T) / 2.0)(m.exp(a)),
    "y + y[::-1]": lambda m, a: (lambda y: y + y[::-1])(m.exp(a)),
    "y - y[::-1, ::-1]": lambda m, a: (lambda y: y - y[::-1, ::-1])(m.exp(a)),
    "z - z.T": lambda m, a: (lambda z: z - z.T)(a @ a.T + 1),
    "a + a.T": lambda m, a: a + a.T,
}


def test_chunked_kernels_never_overwrite_rows_they_still_read():
    a = np.random.default_rng(0).normal(size=(800, 800)).astype(np.float32) * 0.1
    assert chunked.chunk_rows(pipeline.fuse(pipeline.optimize(
        fg.make_jaxpr(lambda x: fnp.exp(x) + 1)(a))).kernels[0].spec) is not None
    for name, f in ALIASING.items():
        closed = fg.make_jaxpr(lambda x, f=f: f(fnp, x))(a)
        want = f(np, a.astype(np.float64))
        for donate in ((), (0,)):
            got = pipeline.compile_jaxpr(closed, donate_argnums=donate)(a.copy())[0]
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5, err_msg=name)
        got = fg.jit(lambda x, f=f: f(fnp, x), donate_argnums=0)(fnp.array(a))
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-5, err_msg=name)
        if native_build.compiler() is not None:  # in place in C: only when reads align
            got = native_results(closed, [a], donate_argnums=(0,))[0]
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5, err_msg=name)


# Operands of one fused kernel over a (rows, cols) space, by how they broadcast into it.
OPERAND_SHAPES = {"full": lambda r, c: (r, c), "column": lambda r, c: (r, 1),
                  "row": lambda r, c: (1, c), "vector": lambda r, c: (c,),
                  "scalar": lambda r, c: ()}


@settings(max_examples=40)
@given(kinds=st.lists(st.sampled_from(sorted(OPERAND_SHAPES)), min_size=1, max_size=4),
       ops=st.lists(st.integers(0, 63), min_size=1, max_size=6),
       reduce=st.sampled_from(["sum", "max", "min", None]),
       axis=st.sampled_from([0, 1, None]), rows=st.sampled_from([5, 7, 12]),
       cols=st.sampled_from([1, 3, 4]), seed=st.integers(0, 2**16))
def test_chunked_kernels_with_broadcast_operands_match_numpy(kinds, ops, reduce, axis, rows,
                                                             cols, seed):
    # every way an operand can broadcast into a kernel's iteration space, through the chunked
    # loop (forced on small arrays: chunks of 1-3 rows, a short last one) and plainly
    rng = np.random.default_rng(seed)
    inputs = [rng.normal(size=OPERAND_SHAPES[k](rows, cols)).astype(np.float32) for k in kinds]

    def f(m, *xs):
        acc = m.broadcast_to(xs[0], (rows, cols))  # the kernel's iteration space, whatever
        for n, code in enumerate(ops):               # the operands' shapes
            x = xs[(n + 1) % len(xs)]
            acc = (BINARY[code % len(BINARY)](m, acc, x) if code & 8
                   else UNARY[code % len(UNARY)](m, acc))
        if reduce is None:
            return acc
        return getattr(m, reduce)(acc, axis=axis)
    closed = fg.make_jaxpr(lambda *xs: f(fnp, *xs))(*inputs)
    want = f(np, *[x.astype(np.float64) for x in inputs])
    results = list(compiled_both_ways(closed, inputs))
    if native_build.compiler() is not None:  # C kernels read them through strides
        results.append(native_results(closed, inputs))
    for got in results:
        np.testing.assert_allclose(got[0], want, rtol=1e-4, atol=1e-4)


def _loop_body(m, recipe, c, y, v):
    """A random body that keeps the carry's shape: the recipe's values that broadcast to it,
    squashed and mixed into half the carry."""
    pool = [c, y, v]
    for op, i, j, k in recipe:
        pool.append(_step(m, pool, op, i, j, k))
    acc = c * 0.5
    for p in pool[3:]:
        if _broadcastable(p, c) and np.broadcast_shapes(p.shape, c.shape) == c.shape:
            acc = acc + 0.1 * m.tanh(p)
    return acc


@settings(max_examples=15)
@given(recipe=recipes, shape=st.sampled_from(SHAPES), seed=st.integers(0, 2**16),
       kind=st.sampled_from(["fori", "scan", "while"]), n=st.integers(0, 5))
def test_random_loop_bodies_match_a_python_loop(recipe, shape, seed, kind, n):
    # fori_loop / scan / while_loop around a random body: compiled (numpy backend, and C loops
    # when a compiler is found) against a Python loop of the same body in float64
    x, y, v = _inputs(shape, seed)

    def loop(c, y, v):
        body = lambda c: _loop_body(fnp, recipe, c, y, v)
        if kind == "fori":
            return fg.lax.fori_loop(0, n, lambda i, c: body(c), c)
        if kind == "while":
            return fg.lax.while_loop(lambda s: s[0] < n, lambda s: (s[0] + 1, body(s[1])),
                                     (0, c))[1]
        return fg.lax.scan(lambda c, _: (body(c), fnp.sum(c)), c, None, length=n)[0]
    want = x.astype(np.float64)
    for _ in range(n):
        want = _loop_body(np, recipe, want, y.astype(np.float64), v.astype(np.float64))
    closed = fg.make_jaxpr(loop)(x, y, v)
    numpy_backend = pipeline.compile_jaxpr(closed, backend="numpy")(x, y, v)[0]
    np.testing.assert_allclose(numpy_backend, want, rtol=1e-4, atol=1e-4)
    if native_build.compiler() is not None:
        np.testing.assert_allclose(native_results(closed, [x, y, v])[0], numpy_backend,
                                   rtol=2e-5, atol=2e-5)


# --- one set of bits on every backend ----------------------------------------------------------
# Programs of the operations numpy computes exactly (IEEE arithmetic rounded once per op,
# float16 ops in float32 rounded to float16 after each, max/min and their signed zeros,
# selects, casts) over float16, float32 and float64 inputs full of special values
# (subnormals, signed zeros, infinities, NaNs with payloads): the numpy backend (plain and in
# chunks), eager evaluation, the native C backend and the CUDA text (in the CPU emulation)
# all give numpy's bits, NaN payloads aside.

def _from_bits(bits, dtype):
    uint = {2: np.uint16, 4: np.uint32, 8: np.uint64}[np.dtype(dtype).itemsize]
    return np.array(bits, uint).view(dtype)


SPECIALS = {
    "float16": np.concatenate([np.array([0.0, -0.0, 1.5, -2.25, 6e-8, -3e-5, 6.1e-5, 65504.0,
                                         -65504.0, np.inf, -np.inf, 1 / 3, 1e-3], np.float16),
                               _from_bits([0x7E01, 0xFE55, 0x7C01], np.float16)]),
    "float32": np.concatenate([np.array([0.0, -0.0, 1.5, -2.25, 1e-45, -3e-44, 2.0 ** -130,
                                         1.2e-38, 3.4e38, np.inf, -np.inf, 1 / 3, 1e-3,
                                         65519.0, 65520.0, 2.0 ** -25 * 1.5], np.float32),
                               _from_bits([0x7FC00001, 0xFFC12345, 0x7F800001], np.float32)]),
    "float64": np.concatenate([np.array([0.0, -0.0, 1 + 2 ** -11 + 2 ** -40, 2 ** -25 + 2 ** -50,
                                         5e-324, -1e-310, 1e300, np.inf, -np.inf, 1 / 3,
                                         2.0 ** -24 * 1.5, 65519.99], np.float64),
                               _from_bits([0x7FF8000000000001, 0xFFF0000000012345],
                                          np.float64)]),
}
SPECIALS["bfloat16"] = np.concatenate([
    np.array([0.0, -0.0, 1.5, -2.25, 1e-40, -9.2e-41, 1.2e-38, 3.38e38, -3.38e38, np.inf,
              -np.inf, 1 / 3, 1e-3], np.float32).astype("bfloat16"),
    _from_bits([0x7FC1, 0xFF85, 0x7F81], "bfloat16")])
EXACT_UNARY = [
    lambda m, x: -x, lambda m, x: m.abs(x), lambda m, x: x * x, lambda m, x: x / 3.0,
    lambda m, x: m.maximum(x, 0.0), lambda m, x: m.minimum(-0.0, x),
    lambda m, x: m.minimum(m.maximum(x, -1.0), 1.0), lambda m, x: x * 0.5 - 0.25,
    lambda m, x: x.astype(np.float16).astype(x.dtype), lambda m, x: x.astype(np.float16),
    lambda m, x: x.astype(np.float32), lambda m, x: m.where(x != x, 0.0, x),
]
EXACT_BINARY = [
    lambda m, x, y: x + y, lambda m, x, y: x - y, lambda m, x, y: x * y,
    lambda m, x, y: x / y, lambda m, x, y: m.maximum(x, y), lambda m, x, y: m.minimum(x, y),
    lambda m, x, y: m.where(x > y, x, y), lambda m, x, y: m.maximum(y, x) * m.minimum(y, x),
]
EXACT_OPS = ["unary", "binary", "reduce", "transpose", "reverse", "broadcast"]


def _exact_step(m, pool, op, i, j, k):
    x, y = pool[i % len(pool)], pool[j % len(pool)]
    if op == "binary" and _broadcastable(x, y):
        return EXACT_BINARY[k % len(EXACT_BINARY)](m, x, y)
    if op == "reduce" and x.ndim:
        return (m.max if k % 2 else m.min)(x, axis=k % x.ndim, keepdims=bool(k & 4))
    if op == "transpose" and x.ndim >= 2:
        return x.T
    if op == "reverse" and x.ndim:
        return x[::-1]
    if op == "broadcast":
        return m.broadcast_to(x, (2,) + x.shape)
    return EXACT_UNARY[k % len(EXACT_UNARY)](m, x)


def _exact_recipe(m, recipe, inputs):
    pool = list(inputs)
    for op, i, j, k in recipe:
        pool.append(_exact_step(m, pool, op, i, j, k))
    return tuple(pool[len(inputs):][-3:])


def _special_inputs(dtypes, shape, seed):
    rng = np.random.default_rng(seed)
    out = []
    for dt in dtypes:
        special = SPECIALS[dt]
        x = rng.normal(size=shape).astype(dt)
        u = rng.random(shape)
        pick = u < 0.6
        x[pick] = special[rng.integers(0, len(special), int(pick.sum()))]
        x[u < 0.3] = np.where(rng.random(int((u < 0.3).sum())) < 0.5, 0.0, -0.0)  # many zeros
        out.append(x)
    return out


def assert_same_bits(got, want, what):
    """Bit for bit, NaN payloads aside (NaN where NaN, signed zeros equal in sign)."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape and got.dtype == want.dtype, (what, got.dtype, want.dtype)
    nan = np.isnan(want) if fg.dtypes.is_float(want.dtype) else np.zeros(want.shape, bool)
    assert np.array_equal(np.isnan(got) if fg.dtypes.is_float(got.dtype) else nan, nan), what
    size = want.dtype.itemsize
    bits = lambda a: a[~nan].view({2: np.uint16, 4: np.uint32, 8: np.uint64}[size])
    assert np.array_equal(bits(got), bits(want)), (what, got[~nan], want[~nan])


def _cuda_emulated(closed, inputs):
    from funcgrad.backends.cuda import emulate, program
    old = program.set_runtime(emulate.EmulatedRuntime())
    try:
        return pipeline.compile_jaxpr(closed, backend="cuda")(*inputs)
    finally:
        program.set_runtime(old)


def _cuda_compiler():
    from funcgrad.backends.cuda import emulate
    return emulate.compiler()


@settings(max_examples=10)
@given(recipe=st.lists(st.tuples(st.sampled_from(EXACT_OPS), st.integers(0, 63),
                                 st.integers(0, 63), st.integers(0, 11)),
                       min_size=1, max_size=8),
       dtypes=st.lists(st.sampled_from(["float16", "float32", "float64"]), min_size=2,
                       max_size=2),
       shape=st.sampled_from([(3, 5), (7,), (2, 3, 4), (6, 1)]), seed=st.integers(0, 2**16))
# a max over a strided axis of a kernel that also writes -x: the zero's sign of numpy's fold
@example(recipe=[("unary", 0, 0, 0), ("reduce", 2, 0, 1)], dtypes=["float32", "float16"],
         shape=(2, 3, 4), seed=1)
def test_exact_programs_give_numpy_bits_on_every_backend(recipe, dtypes, shape, seed):
    fg.config.update("enable_x64", True)  # float64 stays float64 (conftest resets it)
    inputs = _special_inputs(dtypes, shape, seed)
    with np.errstate(all="ignore"):
        want = _exact_recipe(np, recipe, inputs)
        closed = fg.make_jaxpr(lambda *a: _exact_recipe(fnp, recipe, a))(*inputs)
        results = {"eager": eval_jaxpr(closed.jaxpr, closed.consts, *inputs)}
        results["numpy"], results["numpy chunked"] = compiled_both_ways(closed, inputs)
        if native_build.compiler() is not None:
            results["native"] = native_results(closed, inputs)
        if _cuda_compiler() is not None:
            results["cuda emulation"] = _cuda_emulated(closed, inputs)
    for name, got in results.items():
        assert len(got) == len(want), name
        for k, (g, w) in enumerate(zip(got, want)):
            assert_same_bits(g, w, f"{name} output {k}")


def _every_backend(fn, *inputs, x64=False):
    """{backend: results} of `fn` on `inputs`: eager, numpy backend, native, CUDA emulation."""
    fg.config.update("enable_x64", x64)
    with np.errstate(all="ignore"):
        closed = fg.make_jaxpr(fn)(*inputs)
        out = {"eager": eval_jaxpr(closed.jaxpr, closed.consts, *inputs),
               "numpy": pipeline.compile_jaxpr(closed, backend="numpy")(*inputs)}
        if native_build.compiler() is not None:
            out["native"] = native_results(closed, inputs)
        if _cuda_compiler() is not None:
            out["cuda emulation"] = _cuda_emulated(closed, inputs)
    return out


def _all_equal(results, want):
    for name, got in results.items():
        for k, (g, w) in enumerate(zip(got, want)):
            assert_same_bits(g, w, f"{name} output {k}")


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_signed_zeros_of_max_and_min_are_numpys_everywhere(dtype):
    # numpy's maximum/minimum give their second operand on a tie of +0 and -0 for
    # float32/64 and their first for float16; its max/min reductions fold them left to right
    # (the last zero's sign; float16: the first's), so do the compiled ones, whether they
    # run in SIMD lanes, warps or blocks (rows of 5, 43 and 2003), and inside a scan. (numpy
    # itself breaks its rule where its SIMD loop leaves one element over: rows of 16k + 1
    # float32s, 8k + 1 float64s, counting `initial`, which eager's max passes)
    rng = np.random.default_rng(0)
    z = np.array([0.0, -0.0, 0.0, -0.0], dtype)
    w = np.array([0.0, 0.0, -0.0, -0.0], dtype)
    rows = [np.where(rng.random((6, n)) < 0.5, 0.0, -0.0).astype(dtype)
            for n in (5, 43, 2003)]
    rows[1][:, 7] = -1.0  # a negative value among the zeros changes nothing

    def fn(z, w, a, b, c):
        def body(carry, x):
            m = fnp.maximum(carry, x.max())
            return m, (x.max(), x.min(), fnp.minimum(x, carry))
        scanned = fg.lax.scan(body, z[1], a)
        return (fnp.maximum(z, w), fnp.minimum(z, w), fnp.maximum(z, 0.0),
                fnp.minimum(-0.0, z), fg.lax.clamp(z[2], w, z[0]), a.max(1), a.min(0), b.max(1),
                b.min(1),
                c.max(1), c.min(1), (c * 1.0).max(0), scanned)
    args = (z, w) + tuple(rows)
    fg.config.update("enable_x64", dtype == "float64")  # conftest resets it
    want = fg.tree_util.tree_leaves(fn(*[fnp.asarray(a) for a in args]))
    assert [np.signbit(np.asarray(x)).tolist() for x in want[:2]] == (
        [[False, True, False, True]] * 2 if dtype == "float16" else
        [[False, False, True, True]] * 2)  # numpy's own rule: z's signs, or w's
    results = {name: fg.tree_util.tree_leaves(out) for name, out in
               _every_backend(lambda *a: fn(*a), *args, x64=dtype == "float64").items()}
    _all_equal(results, [np.asarray(x) for x in want])


def test_float16_is_rounded_after_every_operation_everywhere():
    # a 4-op float16 chain: numpy rounds each result to float16 (the CUDA renderer did not:
    # 791 of 2001 elements differed in the emulation)
    rng = np.random.default_rng(0)
    a, b, c = (rng.standard_normal(2001).astype(np.float16) for _ in range(3))
    fn = lambda a, b, c: ((a * b + c) * a - b) / c
    with np.errstate(all="ignore"):
        want = [fn(a, b, c)]
    _all_equal(_every_backend(fn, a, b, c), want)


def test_float64_to_float16_rounds_once_everywhere():
    # through float32 it rounds twice: 1 + 2^-11 + 2^-40 went to 1.0 and 2^-25 + 2^-50 to 0
    rng = np.random.default_rng(1)
    ties = 1 + (np.arange(512) * 2.0 + 1) * 2.0 ** -11  # halfway between float16s
    x = np.concatenate([[1 + 2 ** -11 + 2 ** -40, 2 ** -25 + 2 ** -50, -2 ** -25 - 2 ** -60,
                         65519.99, 65520.0, 1e-300, -0.0, np.nan, np.inf],
                        ties * (1 + 2.0 ** -40), ties * (1 - 2.0 ** -40), ties,
                        rng.normal(size=1000) * 2.0 ** rng.integers(-30, 16, 1000)])
    with np.errstate(over="ignore"):
        want = [x.astype(np.float16), (x * 3).astype(np.float16)]
    assert want[0][0] == np.float16(1.001) and want[0][1] == np.float16(5.96e-08)
    _all_equal(_every_backend(lambda x: (x.astype(np.float16), (x * 3).astype(np.float16)), x,
                              x64=True), want)


@settings(max_examples=10)
@given(recipe=st.lists(st.tuples(st.sampled_from(EXACT_OPS), st.integers(0, 63),
                                 st.integers(0, 63), st.integers(0, 11)),
                       min_size=1, max_size=8),
       dtypes=st.lists(st.sampled_from(["bfloat16", "float32"]), min_size=2, max_size=2),
       shape=st.sampled_from([(3, 5), (7,), (2, 3, 4), (6, 1)]), seed=st.integers(0, 2**16))
def test_exact_bfloat16_programs_give_eager_bits_on_every_backend(recipe, dtypes, shape, seed):
    # bfloat16 computed in float32 and rounded after every operation (eager: ml_dtypes'
    # rounding, tests/test_bfloat16.py), with float16 and float32 casts and operands mixed
    # in: the numpy backend (plain, chunked), native C and the CUDA emulation give eager's bits
    inputs = _special_inputs(dtypes, shape, seed)
    with np.errstate(all="ignore"):
        closed = fg.make_jaxpr(lambda *a: _exact_recipe(fnp, recipe, a))(*inputs)
        want = eval_jaxpr(closed.jaxpr, closed.consts, *inputs)
        results = dict(zip(["numpy", "numpy chunked"], compiled_both_ways(closed, inputs)))
        if native_build.compiler() is not None:
            results["native"] = native_results(closed, inputs)
        if _cuda_compiler() is not None:
            results["cuda emulation"] = _cuda_emulated(closed, inputs)
    _all_equal(results, [np.asarray(w) for w in want])


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_a_max_beside_an_elementwise_output_keeps_numpys_zero_sign(dtype):
    # found by the bfloat16 fuzz: a kernel writing c and reducing it cannot read its rows
    # again for a zero's sign, so its max folds in order (numpy keeps the later of -0, +0)
    x = np.array([[0.0, -0.0, 2.0], [-0.0, 0.0, -1.0], [-0.0, -0.0, 0.0]], dtype)
    fn = lambda a: (fnp.minimum(-0.0, a), lax.reduce_max(fnp.minimum(-0.0, a), (1,)))
    closed = fg.make_jaxpr(fn)(x)
    want = eval_jaxpr(closed.jaxpr, closed.consts, x)
    results = dict(zip(["numpy", "numpy chunked"], compiled_both_ways(closed, [x])))
    if native_build.compiler() is not None:
        results["native"] = native_results(closed, [x])
    _all_equal(results, [np.asarray(w) for w in want])


@pytest.mark.parametrize("dtype, n", [("float32", 600_000), ("float64", 600_000),
                                      ("float16", 30_000)])
def test_compiled_sums_are_at_least_as_accurate_as_numpys(dtype, n):
    # numpy sums along a row pairwise, so its error grows with the log of the length; a
    # compiled sum that adds in order, in SIMD lanes, per thread or chunk by chunk must not
    # lose to it (issue 25: fmod(v0, sum(v1)) over 600,000 float32 differed, eager to jit).
    # Each backend's error against an exact sum (math.fsum) is at most eager's or one ulp
    # of the result (two sums that are both good to about an ulp differ by luck; one that
    # adds 600,000 float32s in order is thousands of ulps off).
    import math
    rng = np.random.default_rng(3)
    scale = 1.0 if dtype == "float16" else 1e4
    x = (rng.random((3, n)) * scale + rng.normal(size=(3, n)) * scale / 10).astype(dtype)
    fn = lambda x: (x.sum(1), (x * 1.5).sum(1), fnp.sum(x[:, ::-1].T, axis=0))
    fg.config.update("enable_x64", dtype == "float64")
    rows = [r.astype(np.float64) for r in x]
    exact = [np.array([math.fsum(r) for r in rows]),
             np.array([math.fsum(r * 1.5) for r in rows]), np.array([math.fsum(r) for r in rows])]
    eager = [np.asarray(o) for o in fn(fnp.asarray(x))]
    results = _every_backend(fn, x, x64=dtype == "float64")
    with tiny_chunks():  # the numpy backend's chunked loop, partial sums added across chunks
        closed = fg.make_jaxpr(fn)(x)
        results["numpy chunked"] = pipeline.compile_jaxpr(closed, backend="numpy")(x)
    del results["eager"]
    for name, got in results.items():
        for k, (g, e, ref) in enumerate(zip(got, eager, exact)):
            g = np.asarray(g)
            assert g.dtype == e.dtype, (name, k)
            ulp = np.spacing(np.abs(ref).astype(dtype)).astype(np.float64)
            err, err_eager = np.abs(g - ref), np.abs(e.astype(np.float64) - ref)
            assert np.all(err <= np.maximum(err_eager, ulp)), (name, k, err, err_eager)
