"""CUDA backend, tiers 2-3 without a GPU: the exact CUDA text of every canonical kernel, run on
the CPU through the emulation header (threads, barriers, warp shuffles), compared with
funcgrad's eager results on fresh random inputs with poisoned outputs; 64-bit index
arithmetic through offset probes on huge virtual shapes; sanitizers on planted bugs.
Needs only a host C++ compiler (g++ or clang++)."""

import dataclasses

import cuda_canonical as canonical
import numpy as np
import pytest

from funcgrad.backends.cuda import emulate
from funcgrad.backends.cuda.plan import plan_kernel
from funcgrad.compiler.fusion import Instr, KernelInput, KernelOutput, KernelSpec

pytestmark = pytest.mark.skipif(emulate.compiler() is None, reason="no host C++ compiler")

INT64_CASES = ["ew_row_col_broadcast", "ew_vec_relu_bias", "sum_k33_3d_rows",
               "sum_split_block", "sum_axes_0_2"]


@pytest.fixture(scope="module")
def built():
    """Every canonical case (and int64-index variants of a few) in one emulation library."""
    rng = np.random.default_rng(1234)
    cases = {}
    for case in canonical.CASES:
        cases[case.name] = (case, *case.build(rng))
    for name in INT64_CASES:
        case, plan, ins, exp = cases[name]
        wide = dataclasses.replace(plan, index="int64", name=plan.name + "_i64")
        cases[name + "_int64"] = (case, wide, ins, exp)
    lib = emulate.build([c[1] for c in cases.values()])
    return cases, lib


def run(lib, plan, inputs, device):
    outs = [emulate.EmulatedRuntime.empty(o.shape, o.dtype) for o in plan.spec.outputs]
    return lib.run(plan, inputs, outs, device)


@pytest.mark.parametrize("name", [c.name for c in canonical.CASES] +
                         [n + "_int64" for n in INT64_CASES])
def test_kernel_matches_eager(built, name):
    cases, lib = built
    case, plan, inputs, expected = cases[name]
    if case.strategy:
        assert plan.strategy == case.strategy
    assert (plan.splits > 1) == case.split
    got = run(lib, plan, inputs, case.device)
    for g, w in zip(got, expected):
        assert canonical.tolerance_ok(g, w, case.rtol), (name, g.ravel()[:8], w.ravel()[:8])


def test_vectorized_kernels_are_exercised(built):
    cases, _ = built
    assert {n for n, c in cases.items() if c[1].vec == 4} >= {"ew_vec_relu_bias",
                                                              "ew_vec_where_mask", "ew_vec_bool"}


def test_every_strategy_is_exercised(built):
    cases, _ = built
    seen = {(c[1].strategy, c[1].splits > 1) for c in cases.values()}
    assert seen >= {("elementwise", False), ("thread_per_row", False),
                    ("warp_per_row", False), ("block_per_row", False),
                    ("block_per_row", True), ("thread_per_row", True)}


def test_same_kernel_on_a_bigger_device_grid(built):
    """A different grid (more blocks, grid-stride loop taken fewer times) gives the same
    result: the kernels do not depend on the launch geometry."""
    cases, lib = built
    case, plan, inputs, expected = cases["ew_odd_size"]
    bigger = dataclasses.replace(case.device, sm_count=3)
    got = run(lib, plan, inputs, bigger)
    assert canonical.tolerance_ok(got[0], expected[0], case.rtol)


# --- 64-bit index arithmetic without memory ----------------------------------------------------

def _probe_spec(shape, inputs, reduce_axes=()):
    ins = tuple(KernelInput(f"in{k}", "float32", s, a) for k, (s, a) in enumerate(inputs))
    body = tuple(Instr(f"t{k}", "add", (f"in{k}", f"in{k + 1}" if k + 1 < len(ins) else "in0"),
                       "float32") for k in range(len(ins)))
    if reduce_axes:
        out_shape = tuple(s for i, s in enumerate(shape) if i not in reduce_axes)
        outs = (KernelOutput("out0", body[-1].dst, "float32", tuple(shape)),
                KernelOutput("out1", body[-1].dst, "float32", out_shape, "sum"))
    else:
        outs = (KernelOutput("out0", body[-1].dst, "float32", tuple(shape)),)
    return KernelSpec("probe", tuple(shape), ins, body, outs, tuple(reduce_axes))


def _expected_offsets(spec, coords):
    """numpy's element offsets of each input (broadcast strides) and of the output."""
    S = spec.iter_shape
    cols = []
    for inp in spec.inputs:
        strides = inp.strides(S)
        cols.append(sum(c * s for c, s in zip(coords, strides)))
    cols.append(np.ravel_multi_index(coords, S))
    return np.stack(cols, 1)


@pytest.mark.parametrize("shape, inputs", [
    ((3, 2 ** 30), [((2 ** 30,), (1,)), ((3, 1), (0, 1))]),
    ((5, 6151, 70001), [((5, 1, 70001), (0, 1, 2)), ((6151, 1), (1, 2))]),
    ((2, 2, 2 ** 29 - 1), [((2, 2 ** 29 - 1), (1, 2)), ((2, 2, 2 ** 29 - 1), (0, 1, 2))]),
    ((70001, 40000), [((40000, 70001), (1, 0))]),  # transposed read past 2^31
])
def test_offsets_of_huge_elementwise_shapes(shape, inputs):
    spec = _probe_spec(shape, inputs)
    plan = plan_kernel(spec)
    assert plan.index == "int64"
    n = int(np.prod(shape))
    rng = np.random.default_rng(0)
    near = [2 ** 31 - 1, 2 ** 31, 2 ** 32 - 1, 2 ** 32, n - 1, 0]
    where = np.concatenate([rng.integers(0, n, 3000), [w for w in near if w < n]])
    got = emulate.run_probe(plan, where)
    coords = np.unravel_index(where, shape)
    assert (got == _expected_offsets(spec, coords)).all()


def test_offsets_of_a_huge_reduction():
    shape = (3000, 7, 200003)  # rows (3000, 200003) reduce over the middle axis
    spec = _probe_spec(shape, [((3000, 7, 200003), (0, 1, 2)), ((200003,), (2,))], (1,))
    plan = plan_kernel(spec)
    assert plan.index == "int64" and plan.inner == (7,)
    rng = np.random.default_rng(1)
    rows = rng.integers(0, plan.rows, 2000)
    ks = rng.integers(0, plan.k, 2000)
    got = emulate.run_probe(plan, np.stack([rows, ks], 1))
    r0, r2 = np.unravel_index(rows, (3000, 200003))
    coords = (r0, ks, r2)
    exp = _expected_offsets(spec, coords)
    assert (got == exp).all()


# --- sanitizers on the emulated kernels ---------------------------------------------------------

def _drop_last_sync(src):
    i = src.rindex("__syncthreads();")
    return src[:i] + src[i + len("__syncthreads();"):]


def test_thread_sanitizer_finds_a_missing_barrier_and_passes_the_real_kernel():
    case = canonical.by_name("sum_k4097_block")
    plan, _, _ = case.build(np.random.default_rng(0))
    plan = dataclasses.replace(plan, outer=(11,))  # 8 blocks: some reuse shared memory
    rc, out = emulate.sanitizer_run(plan, "thread", case.device)
    assert rc == 0 and "data race" not in out, out[-3000:]
    for _ in range(3):  # a race detector sees a race only in the schedules that show it;
        rc, out = emulate.sanitizer_run(plan, "thread", case.device, patch=_drop_last_sync)
        if "data race" in out:  # on a loaded machine one run may not
            break
    assert rc != 0 and "data race" in out


def test_address_sanitizer_finds_an_out_of_bounds_read():
    case = canonical.by_name("ew_odd_size")
    plan, _, _ = case.build(np.random.default_rng(0))
    rc, out = emulate.sanitizer_run(plan, "address", case.device,
                                    patch=lambda s: s.replace("_i < 100003", "_i <= 100003"))
    assert rc != 0 and "heap-buffer-overflow" in out


def test_float16_nextafter_steps_a_float16_ulp():
    # the CUDA prelude's fg_nextafter_half, run through the emulation on every finite half
    # towards +inf, -inf and zero, against numpy (a float32 nextafterf would round back)
    x = np.arange(0, 0x10000, dtype=np.uint16).view(np.float16)
    x = x[np.isfinite(x)][:8192]
    n = x.size
    for target in (np.inf, -np.inf, 0.0):
        y = np.full_like(x, target)
        spec = KernelSpec("nextafter16", (n,),
                          (KernelInput("in0", "float16", (n,), (0,)),
                           KernelInput("in1", "float16", (n,), (0,))),
                          (Instr("t0", "nextafter", ("in0", "in1"), "float16"),),
                          (KernelOutput("out0", "t0", "float16", (n,)),))
        plan = plan_kernel(spec)
        lib = emulate.build([plan])
        got = run(lib, plan, [x, y], canonical.CASES[0].device)[0]
        with np.errstate(over="ignore"):
            want = np.nextafter(x, y)
        np.testing.assert_array_equal(got.view(np.uint16), want.view(np.uint16))
