"""Every deliberate difference between funcgrad and JAX (or optax), with its reason: one table.

`docs/for-jax-users.md` shows it (`<!-- jax-differences -->`, rendered by
`jax_signatures.differences_markdown`), and `tests/test_jax_signatures.py` holds it to the
recorded signatures (`jax_names.json`): every signature difference the check finds must be
here (or be work in progress), and every entry with `checked=True` must still be one the
check finds. Entries with `checked=False` describe behaviour a signature cannot show; their
`jax` field says what JAX does where the name alone does not. A name `"jax.numpy.*"` stands
for every function of that namespace.

`MISSING` gives the reason for a public JAX name funcgrad does not have on purpose (the name
table shows it beside the name).

Add a row when funcgrad has to differ; remove it when the difference is fixed.
"""

from typing import NamedTuple


class Difference(NamedTuple):
    name: str  # JAX's (or optax's) full name, e.g. "jax.numpy.array"
    parameters: tuple  # the parameters concerned (as the check names them: "*args" too)
    funcgrad: str  # what funcgrad does
    reason: str  # why, in words a JAX user can accept
    checked: bool = True  # the signature check sees it (False: behaviour only)
    jax: str = ""  # what JAX does, where the name and parameters do not say it


DIFFERENCES = [
    Difference(
        "jax.numpy.dtype", (),
        "`fnp.dtype` stands for `np.dtype` (calls, `isinstance`, `issubclass`, attributes "
        "all go to it) but is not the same object: `fnp.dtype is np.dtype` is False; "
        "`fnp.__all__` leaves out bfloat16, the float8s and int4 & co. (`dir(fnp)` and "
        "attribute access have them).",
        "ml_dtypes, which defines those types, takes 0.66 s and 8 MB to import, so funcgrad "
        "imports it on first need; `fnp.dtype(\"bfloat16\")` and `fnp.bfloat16` load it, "
        "which `np.dtype` itself cannot.", checked=False, jax="`jnp.dtype is np.dtype`."),
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
    # --- behaviour: devices and processes ---
    Difference(
        "jax.jit", ("in_shardings", "out_shardings"),
        "Over several processes' devices, an error: funcgrad compiles per-process programs "
        "(`shard_map(jit(step))`, `pmap`). Outside `pmap`/`shard_map`, each process's program "
        "differentiates its own values (a gradient outside `pmap` is this process's part).",
        "funcgrad has no partitioner for global programs (XLA's SPMD partitioner); data "
        "parallelism over MPI is what `pmap` and `shard_map` give.", checked=False,
        jax="partitions one global program over every process's devices"),
    Difference(
        "jax.make_array_from_callback", (),
        "An array sharded over processes is a `GlobalArray` (this process's block and the global "
        "shape); eager operations take it only through `shard_map`.",
        "Each process holds only its own block; there is no global eager runtime.",
        checked=False, jax="a global `jax.Array` that eager operations take"),
    Difference(
        "jax.default_device", (),
        "Results of eager operations, and of `jit` without `out_shardings`, are placed on the "
        "default device; `default_device` places `device_put(x)`, not the arrays "
        "`funcgrad.numpy` creates. An array sharded over one process's devices holds its whole "
        "value (the sharding records the layout; every result is exact).",
        "A process's devices share its memory: placement is a label, not a copy.",
        checked=False, jax="results follow their operands' shardings"),
    Difference(
        "jax.lax.psum", ("axis_index_groups",),
        "Collectives with `axis_index_groups`, `ppermute` and `all_to_all` are built from "
        "`all_gather`, so they also run under `vmap(axis_name=)` and across processes; each "
        "member briefly holds every member's operand.",
        "One collective (all_gather over MPI) serves them all.", checked=False,
        jax="`vmap` refuses groups"),
    Difference(
        "jax.vmap", ("axis_name",),
        "`vmap(axis_name=)` and `shard_map` type values by the axes they vary over (JAX's "
        "`check_vma`), so the gradient of a `pmean`'d loss is the mean even under `vmap`; "
        "`pmap` and `shard_map(check_vma=False)` follow JAX's untyped rules.",
        "The typed rule gives the gradient a data-parallel program means under every "
        "transform.", checked=False, jax="types values only under `shard_map`"),
    # --- behaviour: random keys ---
    Difference(
        "jax.random.key", (),
        "A typed key array is a pytree over its two `uint32` word arrays rather than a leaf: "
        "`tree_leaves` shows the words and `funcgrad.numpy` functions do not take typed keys "
        "(`random.key_data` gives the words).",
        "funcgrad has no extended dtypes; as a pytree a key passes through every transform "
        "unchanged.", checked=False, jax="a typed key is one leaf with a key dtype"),
    Difference(
        "jax.random.key", ("impl",),
        "Only the default generator, `\"threefry2x32\"`, exists; `impl=\"rbg\"` and the others "
        "raise.",
        "funcgrad implements JAX's default generator and counter layout only (bit for bit).",
        checked=False),
    # --- behaviour: arrays and numbers ---
    Difference(
        "jax.numpy.asarray", ("copy",),
        "`asarray(numpy_array, copy=False)` shares the NumPy array's memory; `numpy.asarray(x)` "
        "of a CPU array gives a NumPy array, and an `Array` prints as NumPy prints.",
        "As the Array API says: arrays are NumPy-backed on the CPU (the default, `copy=None`, "
        "copies as JAX does).", checked=False, jax="copies anyway"),
    Difference(
        "jax.debug.print", ("ordered",),
        "Every effect runs in program order, `ordered=` or not (`partitioned=` is accepted).",
        "One interpreter runs a program's effects in order; reordering them gains nothing "
        "here.", checked=False, jax="unordered effects may run in any order"),
    Difference(
        "jax.numpy.hypot", (),
        "The second derivative where `|x| == |y|` is the true one (0.1768 at (2, 2)), and the "
        "gradient at the origin is 0.",
        "The closed form is simple and JAX's is wrong there (0, and 0.5 at the origin).",
        checked=False),
    Difference(
        "jax.numpy.power", (),
        "`x ** 0.` differentiated twice at 0 is 0.",
        "The true value; JAX gives NaN.", checked=False),
    Difference(
        "jax.numpy.std", (),
        "The gradient over a length-1 axis is 0.",
        "The true value; JAX gives NaN.", checked=False),
    Difference(
        "jax.lax.cond", (),
        "Control flow (`cond`, `scan`, `while_loop`) nested 100 deep works under `grad` and "
        "`vmap`.", "Nesting is bounded by memory, not Python's recursion limit.", checked=False,
        jax="raises RecursionError at that depth"),
    Difference(
        "jax.numpy.*", (),
        "Nested lists and tuples holding traced values are stacked (dtype as `jnp.array`'s: the "
        "promotion of every entry, not weakly typed), so `fnp.mean([x, x + 2])` or "
        "`fnp.linalg.det([[x, 0.], [0., x]])` is differentiable; lax operations take arrays, "
        "as in JAX (a list there is an error naming the operation).",
        "autograd code relies on it, and the alternative before was a silent zero gradient.",
        checked=False, jax="raises a TypeError outside `jnp.array`"),
    Difference(
        "jax.Array", (),
        "NumPy's operator ufuncs called by name on a traced value (`numpy.add(a, x)`, the call "
        "`ndarray + x` makes) compute; every other NumPy function raises "
        "`TracerArrayConversionError`, as in JAX.",
        "NumPy routes `ndarray + x` through them: refusing the names would refuse operators "
        "JAX supports.", checked=False, jax="raises for `numpy.add(a, x)` called by name"),
    Difference(
        "jax.grad", (),
        "Under eager `grad`, `float(x)`, `int(x)`, `bool(x)`, `x.item()` of a traced value give "
        "its value, so Python control flow works; a number made so is a constant, so "
        "`math.sin(float(x))` has no derivative (under `jit`, `vmap` it is an error).",
        "Eager `grad` runs the function on values (define-by-run, as autograd and PyTorch).",
        checked=False, jax="raises `ConcretizationTypeError`"),
    # --- behaviour: abstract evaluation, debugging, configuration ---
    Difference(
        "jax.disable_jit", (),
        "Config states (`disable_jit()`, `enable_x64(True)`, ...) set the process-wide "
        "`funcgrad.config` for the block.", "funcgrad has one options object.", checked=False,
        jax="they hold per thread"),
    Difference(
        "jax.named_scope", (),
        "The name prefixes the function of each equation's source (`model.py:12 (block/fn)`), "
        "shown in generated code, profiles, `viz` pictures and errors.",
        "There is no HLO metadata to carry it.", checked=False,
        jax="names HLO operations"),
    Difference(
        "jax.checkpoint", ("policy",),
        "Every policy saves values of the block's own equations, those the backward pass reads; "
        "the backward pass computes the rules' cheap factors again. An `Offloadable` value is "
        "saved.",
        "The policy sees the block's equations (the linearization is built in the backward "
        "pass); funcgrad's arrays live in one memory.", checked=False,
        jax="`everything_saveable` keeps the jvp rules' values (`1 - tanh²`, `cos`); "
        "`Offloadable` moves a residual to host memory"),
    Difference(
        "jax.profiler.start_trace", (),
        "The trace is Chrome/Perfetto JSON in JAX's folder layout "
        "(`plugins/profile/<run>/<host>.trace.json.gz`, `perfetto_trace.json.gz`); it records "
        "annotations, jitted runs and their kernels, not eager operations; "
        "`create_perfetto_link` prints where the file is.",
        "There is no XLA profiler; the JSON opens in ui.perfetto.dev.", checked=False,
        jax="writes an XPlane protobuf (TensorBoard) and serves Perfetto links"),
    Difference(
        "jax.debug.breakpoint", (),
        "A text debugger, `fgdb`, with jdb's commands on stdin/stdout.",
        "One backend; no web or colab front end.", checked=False,
        jax="opens jdb (cli, web or colab)"),
    Difference(
        "jax.pure_callback", ("sharding",),
        "The callback receives copies as funcgrad Arrays; `sharding` is accepted and unused.",
        "A compiled program reuses its buffers; one device.", checked=False,
        jax="the callback receives device arrays"),
    Difference(
        "jax.config", (),
        "`jax_platforms=\"tpu\"` fails at `config.update`; `jax_default_matmul_precision`, "
        "`jax_compilation_cache_dir`, `jax_persistent_cache_min_*`, `jax_traceback_filtering`, "
        "`jax_check_tracer_leaks` are accepted and checked, with no effect; "
        "`jax_default_prng_impl` other than threefry2x32, "
        "`jax_threefry_partitionable=False` and `jax_enable_custom_prng=True` (also "
        "`enable_custom_prng()`) are errors.",
        "funcgrad runs on \"cpu\" (and \"cuda\"); CPU products are computed in their dtype, "
        "compiled C is cached in `native_cache_dir`, errors already name the user's line, a "
        "leaked tracer always raises when used; only JAX's default generator and layout "
        "exist.", checked=False, jax="these keys change XLA's behaviour"),
    Difference(
        "jax.live_arrays", (),
        "Walks the garbage collector's objects.",
        "Arrays are not registered when created, so they cost nothing.", checked=False),
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
    Difference(
        "jax.scipy.linalg.hilbert", ("n",),
        "`hilbert`, `invhilbert`, `pascal`, `invpascal`, `dft`, `hadamard`, `helmert` and "
        "`convolution_matrix` take an int `n` up to 2**15 (an error beyond, and for a float).",
        "A larger n x n matrix (over 2**30 entries) is refused up front instead of being built "
        "by host code for minutes.", checked=False,
        jax="builds any size memory allows"),
]

# Public JAX (optax) names funcgrad does not have on purpose, with the reason. The name table
# shows the reason beside the name; names missing for lack of time are just missing ("—").
MISSING = {
    "jax.random.random_gamma_p":
        "funcgrad's gamma is a `custom_jvp` function of lax operations: there is no primitive",
    "jax.profiler.device_memory_profile": "no memory profiler yet (`live_arrays()` lists arrays)",
    "jax.profiler.save_device_memory_profile": "no memory profiler yet",
    "jax.make_user_context": "no XLA runtime contexts",
    "jax.profiler.start_server":
        "no profiler server for TensorBoard's remote capture; `start_trace` writes the trace",
    "jax.transfer_guard":
        "implicit host-device transfers are not tracked (on the CPU an array is host memory)",
    "jax.transfer_guard_device_to_host": "as `transfer_guard`",
    "jax.transfer_guard_host_to_device": "as `transfer_guard`",
    "jax.transfer_guard_device_to_device": "as `transfer_guard`",
    "jax.Ref": "funcgrad arrays are immutable: JAX's new mutable references are not implemented",
    "jax.lax.ragged_all_to_all":
        "collectives with ragged (per-member sized) operands are not implemented",
}
