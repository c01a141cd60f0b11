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
        "jax.lax.convert_element_type", ("new_dtype",),
        "An int32/int64 converts to bfloat16 in one rounding (ml_dtypes' and NumPy's rule).",
        "XLA's CPU converts through float32 and rounds twice (2^24 + 2^16 + 1 becomes 2^24, "
        "not 2^24 + 2^17); floats convert in one rounding in both.", checked=False),
    Difference(
        "jax.lax.reduce_sum", ("operand",),
        "A bfloat16 (float8) sum accumulates in float32 and rounds once, on every backend.",
        "XLA's CPU accumulates a bfloat16 `lax.reduce_sum` in bfloat16, in its own tree "
        "order, which no other backend can reproduce; `jnp.sum` upcasts in both, so its "
        "numbers agree.", checked=False),
    Difference(
        "jax.random.maxwell", ("dtype",),
        "In bfloat16, every operation of a sampler rounds its float32 result (maxwell, "
        "double_sided_maxwell and dirichlet differ from JAX in the last bit of some samples; "
        "every other sampler gives JAX's bits).",
        "JAX's samplers are jitted, and XLA's default `xla_allow_excess_precision` lets a "
        "fusion skip roundings to bfloat16 (a norm's squares, a normalizing sum); with it off "
        "JAX gives funcgrad's bits (recorded so).", checked=False),
    Difference(
        "jax.numpy.result_type", ("*args",),
        "Two weakly typed 4-bit (2-bit, 1-bit) integer arrays give the default int.",
        "JAX 0.10.2 raises a KeyError there (its default-type table has no entry for "
        "ml_dtypes' kind 'V').", checked=False),
    Difference(
        "jax.jit", ("backend",),
        "`backend='cuda'` renders and compiles bfloat16 kernels, but running them on a GPU is "
        "an error (float8 and int4 too).",
        "funcgrad's GPU arrays are CuPy's, and CuPy has no bfloat16 (or float8, int4) arrays; "
        "the CPU backends (numpy, native C) run them.", checked=False),
    Difference(
        "jax.numpy.linalg.matrix_rank", ("rtol",),
        "`rtol` is relative to the largest singular value.",
        "As JAX's documentation and NumPy say; JAX 0.10.2's code compares the singular values "
        "with `rtol` itself.", checked=False),
]
