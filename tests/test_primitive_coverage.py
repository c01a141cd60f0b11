"""Nothing about a primitive is forgotten: what it declares (`Primitive.kind`, `fusible`,
`dtype_kinds`...) is checked against the rules and the backend tables it needs.

- Every fusible elementwise primitive has an expression in every backend that fuses
  (numpy, CUDA, native C) or is listed in
  that backend's `UNFUSED` with a reason, never both; every fusible reduction declares one
  `ReduceOp` that every backend computes (and runs fused on each of them).
- Backend tables hold only primitives of the kind they serve.
- Every primitive has the rules its kind needs: abstract eval and impl; a batching rule
  (unless it has no operands); a jvp rule (unless it is not differentiable, by design); a
  transpose rule for a view; and a transpose rule for every primitive a vjp meets in the
  linear part of an elementwise, reduction or view primitive's derivative (run on an
  example built from its declaration).
"""

import importlib
import pkgutil

import numpy as np
import pytest

import funcgrad
import funcgrad.numpy as fnp
from funcgrad import dtypes
from funcgrad.backends.cuda import ops as cuda_ops
from funcgrad.backends.native import build as native_build
from funcgrad.backends.native import ops as native_ops
from funcgrad.backends.numpy import ops as numpy_ops
from funcgrad.core import Primitive, ReduceOp, ShapedArray
from funcgrad.interpreters import ad, batching


def _all_primitives():
    prims = {}
    for mod in pkgutil.walk_packages(funcgrad.__path__, "funcgrad."):
        for obj in vars(importlib.import_module(mod.name)).values():
            if isinstance(obj, Primitive):
                prims[obj.name] = obj
    return [p for _, p in sorted(prims.items())]


PRIMITIVES = _all_primitives()
FUSIBLE_ELEMENTWISE = [p for p in PRIMITIVES if p.kind == "elementwise" and p.fusible]

# backend -> (has an expression for prim, UNFUSED)
FUSING_BACKENDS = {
    "numpy": (lambda p: numpy_ops.elementwise_rule(p.name) is not None, numpy_ops.UNFUSED),
    "cuda": (lambda p: p in cuda_ops.CudaC.code_for_op, cuda_ops.CudaC.unfused),
    "native": (lambda p: p in native_ops.NativeC.code_for_op, native_ops.NativeC.unfused),
}

FUSED_REDUCTIONS = [p for p in PRIMITIVES if p.kind == "reduction" and p.fusible]

# backend -> what it needs of a reduction's `ReduceOp` to compute it in a kernel
REDUCING_BACKENDS = {
    "numpy": lambda op: isinstance(op.ufunc, np.ufunc) and op.ufunc.nin == 2,
    "cuda": lambda op: op.combine in cuda_ops.CudaC.code_for_op,
    "native": lambda op: op.combine in native_ops.NativeC.code_for_op,
}

# By design: no derivative (as in JAX), or no operands to carry a batch axis.
NOT_DIFFERENTIABLE = {"nextafter": "not differentiable in JAX either",
                      "zeta": "not differentiable in JAX either (funcgrad's only in q)"}
NO_OPERANDS = {"iota": "no operand can carry a batch axis"}


def test_the_walk_finds_every_family():
    kinds = {p.kind for p in PRIMITIVES}
    assert kinds == set(Primitive.KINDS) and len(PRIMITIVES) > 100
    assert len(FUSIBLE_ELEMENTWISE) > 60


@pytest.mark.parametrize("backend", sorted(FUSING_BACKENDS))
def test_every_fusible_primitive_has_an_expression_or_a_reason(backend):
    has, unfused = FUSING_BACKENDS[backend]
    missing = [p.name for p in FUSIBLE_ELEMENTWISE if not has(p) and p not in unfused]
    both = [p.name for p in FUSIBLE_ELEMENTWISE if has(p) and p in unfused]
    assert not missing, (f"{backend}: fusible primitives with no expression: {missing}; give "
                         f"each one or list it in the backend's UNFUSED with a reason")
    assert not both, f"{backend}: listed as UNFUSED but given an expression: {both}"


@pytest.mark.parametrize("backend", sorted(FUSING_BACKENDS))
def test_unfused_entries_are_fusible_primitives_with_reasons(backend):
    _, unfused = FUSING_BACKENDS[backend]
    for p, why in unfused.items():
        assert p.kind == "elementwise" and p.fusible, p
        assert isinstance(why, str) and len(why) > 10, p


def test_every_fused_reduction_declares_one_reduce_op():
    assert {p.name for p in FUSED_REDUCTIONS} >= {"reduce_sum", "reduce_max", "reduce_min",
                                                  "reduce_prod"}
    for p in FUSED_REDUCTIONS:
        op = p.reduce_op
        assert isinstance(op, ReduceOp) and ReduceOp.named(op.name) is op, p
        assert op.combine.kind == "elementwise" and op.combine.fusible, p
        for kind in p.dtype_kinds:
            dt = np.dtype({"b": "bool", "i": "int8", "u": "uint16", "f": "float16",
                           "c": "complex64"}[kind])
            np.asarray(op.identity(dt), dt)  # a value of every dtype it accepts
            assert np.dtype(op.accumulate(dt)).kind in "biufc", (p, dt)


@pytest.mark.parametrize("backend", sorted(REDUCING_BACKENDS))
def test_every_fused_reduction_is_computed_by_every_backend(backend):
    missing = [p.name for p in FUSED_REDUCTIONS if not REDUCING_BACKENDS[backend](p.reduce_op)]
    assert not missing, f"{backend} cannot compute the fused reductions {missing}"


REDUCTION_DTYPES = ["float32", "float16", "bfloat16", "int32", "uint8", "bool"]


@pytest.mark.parametrize("dtype", REDUCTION_DTYPES)
def test_every_fused_reduction_runs_fused_on_every_backend(dtype):
    # each fused reduction over the dtypes it accepts, as a kernel of the numpy backend, in C
    # and through the CUDA text (CPU emulation) where those are at hand: eager's numbers
    from funcgrad.backends.cuda import emulate, program
    from funcgrad.compiler import pipeline
    prims = [p for p in FUSED_REDUCTIONS if dtypes.kind(np.dtype(dtype)) in p.dtype_kinds]
    rng = np.random.default_rng(0)
    x = (rng.integers(0, 2, (3, 6)).astype(bool) if dtype == "bool" else
         (rng.normal(size=(3, 6)) * 2).astype(dtype) if "float" in dtype else
         rng.integers(0, 5, (3, 6)).astype(dtype))
    fn = lambda x: [p.bind(x * x if dtype != "bool" else x, axes=ax) for p in prims
                    for ax in ((1,), (0,), (0, 1))]
    closed = funcgrad.make_jaxpr(fn)(x)
    want = fn(fnp.asarray(x))
    assert any(getattr(n, "spec", None) for n in pipeline.fuse(pipeline.optimize(
        closed)).nodes), "no kernel"
    results = {"numpy": pipeline.compile_jaxpr(closed, backend="numpy")(x)}
    if native_build.compiler() is not None:
        saved = funcgrad.config.native
        funcgrad.config.update("native", "sync")
        try:
            exe = pipeline.compile_jaxpr(closed)
        finally:
            funcgrad.config.update("native", saved)
        assert "void fg_k0(" in exe.as_text()
        results["native"] = exe(x)
    if emulate.compiler() is not None:
        old = program.set_runtime(emulate.EmulatedRuntime())
        try:
            results["cuda emulation"] = pipeline.compile_jaxpr(closed, backend="cuda")(x)
        finally:
            program.set_runtime(old)
    for name, got in results.items():
        for g, w in zip(got, want):
            w = np.asarray(w)
            assert g.dtype == w.dtype, (name, g.dtype, w.dtype)
            # (bfloat16: a sum rounds once from float32 or double, eager's from float32)
            rtol = {"float16": 2e-3, "bfloat16": 8e-3}.get(dtype, 1e-6)
            np.testing.assert_allclose(np.asarray(g, np.float64), np.asarray(w, np.float64),
                                       rtol=rtol, err_msg=name)


def test_tables_hold_only_primitives_of_their_kind():
    for table in (numpy_ops.ELEMENTWISE, cuda_ops.CudaC.code_for_op,
                  native_ops.NativeC.code_for_op):
        bad = [p for p in table if not (isinstance(p, Primitive) and p.kind == "elementwise"
                                        and p.fusible)]
        assert not bad, bad
    assert all(isinstance(p, Primitive) and p.kind in ("view", "library")
               for p in numpy_ops.CALLS)


def test_declarations_are_consistent():
    for p in PRIMITIVES:
        assert p.kind in Primitive.KINDS, p
        if p.fusible:
            assert Primitive.fusible_named(p.name) is p, p
        if p.kind == "view" and p.fusible:
            assert callable(p.view_axes), p
        if not p.raw_impl:
            assert p.kind == "higher-order", p
        if p.dtype_kinds is not None:
            assert set(p.dtype_kinds) <= set("biufc"), p


def test_every_primitive_has_the_rules_its_kind_needs():
    missing = []
    for p in PRIMITIVES:
        needs = {"impl": p.impl_rule, "abstract eval": p.abstract_rule}
        if p.name not in NO_OPERANDS:
            needs["batching"] = batching.batch_rules.get(p)
        if p.name not in NOT_DIFFERENTIABLE:
            needs["jvp"] = ad.jvp_rules.get(p)
        if p.kind == "view":
            needs["transpose"] = ad.transpose_rules.get(p)
        missing += [f"{p.name} ({p.kind}): {rule}" for rule, fn in needs.items() if fn is None]
    assert not missing, missing


def test_declared_fusion_prerequisites_are_met():
    # A fusible primitive has one result (a kernel instruction writes one value).
    assert not [p for p in PRIMITIVES if p.fusible and p.multiple_results]


# --- transpose where linear: each derivative's linear part transposes ----------------------

# Params (and operand dtypes where float32 is wrong) the declaration cannot give.
PARAMS = {"integer_pow": {"y": 3}, "round": {"rounding_method": 0}, "polygamma": {"m": 1},
          "convert_element_type": {"new_dtype": np.dtype("float64"), "weak_type": False},
          "reduce_sum": {"axes": (1,)}, "reduce_max": {"axes": (1,)},
          "reduce_min": {"axes": (1,)}, "reduce_prod": {"axes": (1,)},
          "broadcast_in_dim": {"shape": (4, 2, 3), "broadcast_dimensions": (1, 2)},
          "reshape": {"new_sizes": (3, 2)}, "transpose": {"permutation": (1, 0)},
          "squeeze": {"dimensions": ()}, "rev": {"dimensions": (0,)},
          "reduce_precision": {"exponent_bits": 5, "mantissa_bits": 10}}
OPERANDS = {"select_n": ("bool", "float32", "float32"), "real": ("complex64",),
            "imag": ("complex64",)}
# Differentiable-kind primitives with a zero derivative: nothing linear to transpose.
ZERO_DERIVATIVE = {"argmax": "an index", "argmin": "an index",
                   "bitcast_convert_type": "a reinterpretation of bits"}


def _example(p):
    """(operands, params) for `p` over (2, 3) arrays, float32 unless `OPERANDS` says; binary
    ops (rank-0 operands broadcast) take two operands, others the fewest their shape rule
    accepts. None when no such example type-checks."""
    params = PARAMS.get(p.name, {})
    arities = [2] if p.rank0_operands else [1, 2, 3]
    candidates = [OPERANDS[p.name]] if p.name in OPERANDS else [("float32",) * n
                                                                 for n in arities]
    rng = np.random.default_rng(0)
    for dts in candidates:
        avals = [ShapedArray((2, 3), np.dtype(d)) for d in dts]
        try:
            p.abstract_eval(*avals, **params)
        except Exception:
            continue
        vals = [rng.uniform(size=(2, 3)) < 0.5 if d == "bool" else
                (rng.uniform(0.2, 0.8, (2, 3)) * (1 + 1j if d.startswith("c") else 1)).astype(d)
                for d in dts]
        return [fnp.asarray(v) for v in vals], params
    return None


LINEAR_CANDIDATES = [p for p in PRIMITIVES if p.kind in ("elementwise", "reduction", "view")
                     and p.name not in NOT_DIFFERENTIABLE and p.name not in ZERO_DERIVATIVE
                     and (p.dtype_kinds is None or set(p.dtype_kinds) & set("fc"))]


def test_every_candidate_has_an_example():
    assert not [p.name for p in LINEAR_CANDIDATES if _example(p) is None]


@pytest.mark.parametrize("p", LINEAR_CANDIDATES, ids=lambda p: p.name)
def test_the_linear_part_of_each_derivative_transposes(p):
    args, params = _example(p)
    inexact = [i for i, a in enumerate(args) if a.dtype.kind in "fc"]

    def f(*xs):
        full = list(args)
        for i, x in zip(inexact, xs):
            full[i] = x
        return p.bind(*full, **params)
    out, pullback = funcgrad.vjp(f, *[args[i] for i in inexact])
    cts = pullback(fnp.ones_like(out))
    assert [c.shape for c in cts] == [args[i].shape for i in inexact]


# --- every fusible primitive rendered and run by the native backend --------------------------

NATIVE_RUNS = [p for p in FUSIBLE_ELEMENTWISE if p not in native_ops.NativeC.unfused]
# Computed by libm (or our C helpers) on one side and numpy on the other: ulps apart.
LIBM_ULPS = 8


def _native_example(p):
    """(numpy operands over (2, 3), params) for `p`: its first operand dtype (float32,
    int32, bool, uint8) and arity whose shape rule accepts it; ints include negatives."""
    params = PARAMS.get(p.name, {})
    rng = np.random.default_rng(0)
    make = {"float32": lambda: rng.uniform(0.2, 0.8, (2, 3)).astype("float32"),
            "int32": lambda: rng.integers(-20, 20, (2, 3)).astype("int32"),
            "uint8": lambda: rng.integers(0, 250, (2, 3)).astype("uint8"),
            "bool": lambda: rng.uniform(size=(2, 3)) < 0.5}
    arities = [2] if p.rank0_operands else [1, 2, 3]
    if p.name in OPERANDS:
        candidates = [OPERANDS[p.name]]
    else:
        candidates = [(d,) * n for d in make for n in arities]
    for dts in candidates:
        try:
            p.abstract_eval(*[ShapedArray((2, 3), np.dtype(d)) for d in dts], **params)
        except Exception:
            continue
        return [make[d]() for d in dts], params
    return None


@pytest.mark.skipif(native_build.compiler() is None, reason="no C compiler (see "
                    "test_native_backend.py, which fails when one is present but unused)")
@pytest.mark.parametrize("p", NATIVE_RUNS, ids=lambda p: p.name)
def test_every_fusible_primitive_runs_in_c_as_numpy_computes_it(p):
    from funcgrad.compiler import pipeline
    example = _native_example(p)
    assert example is not None, p
    vals, params = example
    closed = funcgrad.make_jaxpr(lambda *xs: p.bind(*xs, **params))(*vals)
    saved = funcgrad.config.native
    funcgrad.config.update("native", "sync")
    try:
        exe = pipeline.compile_jaxpr(closed)
    finally:
        funcgrad.config.update("native", saved)
    assert "void fg_k0(" in exe.as_text(), f"{p.name} did not become a C kernel"
    got = exe(*vals)[0]
    want = pipeline.compile_jaxpr(closed, backend="numpy")(*vals)[0]
    assert got.dtype == want.dtype and got.shape == want.shape
    if got.dtype.kind == "f":
        np.testing.assert_array_max_ulp(got, want, maxulp=LIBM_ULPS)
    else:
        np.testing.assert_array_equal(got, want)
