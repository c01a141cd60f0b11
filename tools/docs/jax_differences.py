"""Every deliberate difference between funcgrad and JAX (or optax), with its reason: one table.

`docs/for-jax-users.md` shows it (`<!-- jax-differences -->`, rendered by
`jax_signatures.differences_markdown`), and `tests/test_jax_signatures.py` holds it to the
recorded signatures (`jax_names.json`): every signature difference the check finds must be
here (or be work in progress), and every entry with `checked=True` must still be one the
check finds. Entries with `checked=False` describe behaviour a signature cannot show.

Add a row when funcgrad has to differ; remove it when the difference is fixed.
"""

from typing import NamedTuple


class Difference(NamedTuple):
    name: str  # JAX's (or optax's) full name, e.g. "jax.numpy.array"
    parameters: tuple  # the parameters concerned (as the check names them: "*args" too)
    funcgrad: str  # what funcgrad does
    reason: str  # why, in words a JAX user can accept
    checked: bool = True  # the signature check sees it (False: behaviour only)


DIFFERENCES = [
    Difference(
        "jax.Array", ("value", "weak_type"),
        "`funcgrad.Array(value, weak_type=False)` wraps a NumPy (or CuPy) value.",
        "`jax.Array` is an abstract type that is never constructed (JAX makes arrays with "
        "`jnp.asarray`); funcgrad's `Array` is the concrete class, and `fnp.asarray` is still "
        "the way to make one."),
    Difference(
        "jax.numpy.array", ("*args",),
        "`copy`, `order` and `ndmin` may be given by position (NumPy's signature).",
        "JAX takes them through `*args` with a deprecation warning: the same calls work in "
        "both."),
    Difference(
        "jax.make_jaxpr", ("return_shape",),
        "The output shapes are funcgrad's abstract values (`ShapedArray`: `shape`, `dtype`, "
        "`weak_type`).",
        "funcgrad has no `ShapeDtypeStruct` yet; the fields JAX code reads are the same.",
        checked=False),
    Difference(
        "jax.jit", ("compiler_options",),
        "Checked to be a dict with str keys; it changes nothing.",
        "These are XLA's options; funcgrad's compilers take none and never relax IEEE "
        "arithmetic.", checked=False),
    Difference(
        "jax.jit", ("device",),
        "A CUDA device picks the \"cuda\" backend and receives the arguments and results; the "
        "kernels run on CuPy's current GPU.",
        "funcgrad's CUDA backend launches on the current device; on one GPU (the common case) "
        "this is JAX's behaviour.", checked=False),
    Difference(
        "jax.nn.dot_product_attention", ("implementation",),
        "`'cudnn'` is an error; with float64 inputs the softmax is computed in float64.",
        "funcgrad has no cuDNN attention (`None`/`'xla'` give JAX's numbers); JAX rounds the "
        "softmax to float32 even for float64 inputs, which a float64 gradient check cannot "
        "pass.", checked=False),
    Difference(
        "jax.lax.linalg.eig", ("enable_eigvec_derivs",),
        "Right eigenvectors are differentiable whatever its value (where the eigenvalues are "
        "distinct).",
        "JAX raises unless asked, because it cannot check the assumption; funcgrad documents "
        "it instead.", checked=False),
    Difference(
        "jax.lax.linalg.eigh", ("subset_by_index",),
        "Works on every backend (the full decomposition, sliced); so does `lax.linalg.svd`'s.",
        "JAX implements it on TPUs only and raises NotImplementedError on CPUs and GPUs.",
        checked=False),
    Difference(
        "jax.numpy.linalg.matrix_rank", ("rtol",),
        "`rtol` is relative to the largest singular value.",
        "As JAX's documentation and NumPy say; JAX 0.10.2's code compares the singular values "
        "with `rtol` itself.", checked=False),
    # --- the long tail (issue 28, item 8) ---
    Difference(
        "jax.lax.random_gamma_grad", ("*args", "a", "x"),
        "`random_gamma_grad(a, x)` names its two operands.",
        "JAX's is wrapped by a broadcasting helper that shows `*args`; it takes the same two "
        "operands (a, x) by position."),
    Difference(
        "jax.lax.zeta", ("x", "q"),
        "Differentiable in `q` (`-x * zeta(x + 1, q)`); a derivative in `x` is an error naming "
        "zeta. Exact for large negative non-integer `q`, where XLA's summation is wrong.",
        "JAX differentiates in neither argument; the derivative in `q` is the standard "
        "identity.", checked=False),
    Difference(
        "jax.lax.igamma_grad_a", ("a", "x"),
        "Differentiable again (in `a` and `x`).",
        "JAX's has no derivative rule; funcgrad's is the jvp of igamma's own iterations.",
        checked=False),
    Difference(
        "jax.lax.betainc", ("a", "b"),
        "Differentiable in `a` and `b` too (through the continued fraction's iterations).",
        "JAX raises for derivatives in a and b.", checked=False),
    Difference(
        "jax.numpy.partition", ("kth",),
        "Returns the fully sorted array (`argpartition`: a stable argsort), which is a valid "
        "partition.",
        "NumPy and JAX leave the order inside each side unspecified; JAX's top_k-based order "
        "is one choice among many.", checked=False),
    Difference(
        "jax.lax.rng_bit_generator", ("algorithm",),
        "RNG_DEFAULT and RNG_PHILOX draw from Philox-4x32-10 (checked against Random123's "
        "answers): key words 0-1 are the key, words 2-3 the counter, and the key returned "
        "has its counter advanced; RNG_THREE_FRY is an error.",
        "XLA leaves the bits unspecified and they differ across platforms; use "
        "funcgrad.random (threefry, JAX's bits) where the values must match JAX.",
        checked=False),
    Difference(
        "jax.lax.rng_uniform", ("a", "b", "shape"),
        "Draws from a generator funcgrad owns (a stateful effect, as XLA's RngUniform): each "
        "call, eager or jitted, gives new values.",
        "XLA's stateful generator has no specified sequence either.", checked=False),
    Difference(
        "jax.scipy.linalg.sqrtm", ("A",),
        "Differentiable: the tangent solves X dX + dX X = dA in the Schur basis.",
        "JAX's goes through schur, which has no derivative; the values are the same.",
        checked=False),
    Difference(
        "jax.scipy.linalg.solve_sylvester", ("A", "B", "C"),
        "Differentiable in A, B and C (the tangent is one more Sylvester solve).",
        "JAX's goes through schur, which has no derivative; the values are the same.",
        checked=False),
    Difference(
        "jax.numpy.add", ("x", "y"),
        "`fnp.add`, `multiply`, `maximum`, `minimum`, `subtract`, the logical_* and "
        "bitwise_* functions and logaddexp(2) are plain functions with the ufunc methods "
        "attached (`reduce`, `accumulate`, `at`, `reduceat`, `outer`, `nin`, `nout`, "
        "`identity`): `isinstance(fnp.add, fnp.ufunc)` is False.",
        "They stay the functions every other funcgrad module calls (and their derivatives); "
        "the methods behave as JAX's.", checked=False),
    Difference(
        "jax.scipy.signal.convolve2d", ("boundary", "fillvalue"),
        "`boundary=\"wrap\"` and `\"symm\"`, and any `fillvalue`, work (SciPy's meanings, "
        "`correlate2d` included).",
        "JAX implements only `boundary=\"fill\"` with `fillvalue=0`.", checked=False),
    Difference(
        "jax.lax.custom_linear_solve", ("b",),
        "Under vmap every operand gets the batch axis (an unbatched one is broadcast) and the "
        "programs are batched whole.",
        "JAX batches only what depends on the batch (a fixed point over the four programs); "
        "the values are the same.", checked=False),
    Difference(
        "jax.scipy.special.expn", ("n", "x"),
        "E_n(0) is 1 / (n - 1) for n >= 2 (SciPy's value; JAX's gives 1 / n), and every "
        "order of derivative in x is finite (E_0 = exp(-x) / x is differentiated directly).",
        "The integral's value at 0 is 1 / (n - 1); JAX's second derivative of `exp1` fails.",
        checked=False),
]
