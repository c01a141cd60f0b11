"""CUDA backend, tier 0: every decision of `plan_kernel` for given shapes (no compiler, no GPU),
the rendered text's invariants, and golden sources of a few canonical kernels
(regenerate with FUNCGRAD_REGEN_GOLDEN=1 after an intended codegen change)."""

import dataclasses
import os
import re

import cuda_canonical as canonical
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from funcgrad.backends.cuda import ops, plan, renderer
from funcgrad.backends.cuda.plan import H200, DeviceInfo, plan_kernel
from funcgrad.compiler.fusion import Const, Instr, KernelInput, KernelOutput, KernelSpec

GOLDEN = os.path.join(os.path.dirname(__file__), "golden", "cuda")


def ew_spec(shape, inputs, dtype="float32", op="add"):
    """out = in0 op in1 op ... over `shape`; inputs as (shape, axes)."""
    ins = tuple(KernelInput(f"in{k}", dtype, s, a) for k, (s, a) in enumerate(inputs))
    body, prev = [], "in0"
    for k in range(1, len(ins)):
        body.append(Instr(f"t{k - 1}", op, (prev, f"in{k}"), dtype))
        prev = f"t{k - 1}"
    if not body:
        body.append(Instr("t0", "neg", ("in0",), dtype))
        prev = "t0"
    return KernelSpec("k0", tuple(shape), ins, tuple(body),
                      (KernelOutput("out0", prev, dtype, tuple(shape)),))


def sum_spec(shape, axes, dtype="float32", perm=None):
    """out = sum over `axes` of in0 (read through the permutation `perm` of its axes)."""
    axes_of = tuple(range(len(shape))) if perm is None else tuple(perm)
    src_shape = tuple(shape[a] for a in axes_of)
    out_shape = tuple(s for i, s in enumerate(shape) if i not in axes)
    return KernelSpec("k0", tuple(shape), (KernelInput("in0", dtype, src_shape, axes_of),), (),
                      (KernelOutput("out0", "in0", dtype, out_shape, "sum"),), tuple(axes))


def full(shape):
    return (tuple(shape), tuple(range(len(shape))))


# --- index width -------------------------------------------------------------------------------

def test_index_width_is_int32_for_ordinary_sizes():
    assert plan_kernel(ew_spec((1024, 1024), [full((1024, 1024))] * 2)).index == "int32"


def test_index_width_is_int64_past_2_31_even_with_small_inputs():
    # 3 x 2^30 outputs from a (2^30,) input broadcast over rows and a (3, 1) column
    p = plan_kernel(ew_spec((3, 2 ** 30), [((2 ** 30,), (1,)), ((3, 1), (0, 1))]))
    assert p.index == "int64"
    assert p.inputs[0].strides == (0, 1) and p.inputs[1].strides == (1, 0)


def test_index_width_keeps_a_margin_for_grid_stride_counters():
    below = 2 ** 31 - plan.INT32_MARGIN - 2
    assert plan_kernel(ew_spec((below,), [full((below,))])).index == "int32"
    assert plan_kernel(ew_spec((below + 2,), [full((below + 2,))])).index == "int64"


def test_index_width_counts_input_extents_not_only_outputs():
    # a reduction to 4 values over 2^31 elements: few outputs, huge offsets
    assert plan_kernel(sum_spec((4, 2 ** 29), (1,))).index == "int64"


# --- collapsing and strides --------------------------------------------------------------------

def test_contiguous_operands_collapse_to_one_dim():
    p = plan_kernel(ew_spec((8, 16, 32), [full((8, 16, 32))] * 2))
    assert p.outer == (8 * 16 * 32,) and p.inputs[0].strides == (1,)


def test_transposed_operand_blocks_collapsing():
    spec = ew_spec((16, 32), [((32, 16), (1, 0)), full((16, 32))])
    p = plan_kernel(spec)
    assert p.outer == (16, 32) and p.inputs[0].strides == (1, 16)


def test_reduced_axes_move_last_and_rows_stay_in_output_order():
    p = plan_kernel(sum_spec((6, 7, 8), (0, 2)))
    assert p.outer == (7,) and p.inner == (6, 8)
    assert p.inputs[0].strides == (8, 56, 1)


@given(st.lists(st.integers(1, 5), min_size=1, max_size=4), st.data())
def test_strides_match_numpy_broadcasting(shape, data):
    """Each input's element strides equal numpy's broadcast strides (itemsize 1) after the
    plan's permutation and collapsing: checked on every element offset."""
    shape = tuple(shape)
    keep = data.draw(st.lists(st.booleans(), min_size=len(shape), max_size=len(shape)))
    src = tuple(s if k else 1 for s, k in zip(shape, keep))
    p = plan_kernel(ew_spec(shape, [(src, tuple(range(len(shape)))), full(shape)]))
    want = np.broadcast_to(np.arange(int(np.prod(src))).reshape(src), shape).ravel()
    dims = p.outer + p.inner
    idx = np.unravel_index(np.arange(int(np.prod(shape))), dims) if dims else ()
    got = sum(c * s for c, s in zip(idx, p.inputs[0].strides)) if dims else np.zeros(1, int)
    assert (np.asarray(got) == want).all()


# --- vector width ------------------------------------------------------------------------------

@pytest.mark.parametrize("shape, inputs, vec", [
    ((64, 1024), [full((64, 1024)), ((1024,), (1,))], 4),  # bias broadcast along rows: ok
    ((64, 1024), [full((64, 1024)), ((64, 1), (0, 1))], 4),  # stride 0 innermost: ok
    ((64, 1020), [full((64, 1020))], 4),  # collapses to one dim of 65280
    ((63, 1023), [full((63, 1023))], 1),  # 64449 elements: not a multiple of 4
    ((64, 1023), [full((64, 1023)), ((1023,), (1,))], 1),  # rows of 1023: misaligned
    ((64, 1024), [((1024, 64), (1, 0))], 1),  # transposed read
    ((8, 8), [full((8, 8))], 1),  # too small to matter
])
def test_vector_width(shape, inputs, vec):
    assert plan_kernel(ew_spec(shape, inputs)).vec == vec


def test_vector_width_needs_4_byte_or_1_byte_elements():
    assert plan_kernel(ew_spec((64, 1024), [full((64, 1024))], "float64")).vec == 1
    assert plan_kernel(ew_spec((64, 1024), [full((64, 1024))], "int32")).vec == 4


# --- reduction strategy ------------------------------------------------------------------------

@pytest.mark.parametrize("shape, axes, perm, strategy, splits", [
    ((16384, 16384), (1,), None, "block_per_row", 1),  # long rows, many of them
    ((2 ** 24, 16), (1,), None, "warp_per_row", 1),  # short rows
    ((2 ** 24, 4), (1,), None, "thread_per_row", 1),  # very short rows
    ((64, 2 ** 22), (1,), None, "block_per_row", 17),  # few long rows: split
    ((60000, 10), (0,), None, "thread_per_row", 937),  # column sums of a batch: split
    ((4096, 4096), (0,), None, "thread_per_row", 64),  # 4096 columns: too few threads
    ((1024, 2 ** 18), (0,), None, "thread_per_row", 1),  # column sums, enough columns
    ((1000, 500), (1,), (1, 0), "thread_per_row", 7),  # reduced axis strided in memory
])
def test_reduction_strategy(shape, axes, perm, strategy, splits):
    p = plan_kernel(sum_spec(shape, axes, perm=perm), H200)
    assert (p.strategy, p.splits) == (strategy, splits)
    assert p.chunk * p.splits >= p.k


def test_strategy_depends_on_the_device():
    small = DeviceInfo(90, 8, 2048)
    assert plan_kernel(sum_spec((64, 2 ** 22), (1,)), small).splits == 1
    assert plan_kernel(sum_spec((64, 2 ** 22), (1,)), H200).splits == 17


def test_accumulator_types():
    assert plan_kernel(sum_spec((64, 300), (1,), "float16")).reductions[0].acc == "float32"
    assert plan_kernel(sum_spec((64, 300), (1,), "int8")).reductions[0].acc == "int32"
    assert plan_kernel(sum_spec((64, 300), (1,), "float64")).reductions[0].acc == "float64"


# --- launch geometry ---------------------------------------------------------------------------

def test_grid_is_capped_and_covers_the_work():
    p = plan_kernel(ew_spec((1000,), [full((1000,))]))
    assert p.grid(H200) == 4  # ceil(1000 / 256)
    big = plan_kernel(ew_spec((2 ** 28,), [full((2 ** 28,))]))
    assert big.grid(H200) == 132 * 8 * 4  # 4 waves of resident blocks, grid-stride beyond
    assert big.grid(H200) * big.block <= plan.MAX_THREADS
    split = plan_kernel(sum_spec((64, 2 ** 22), (1,)))
    assert split.grid(H200) == 64 * 17 and split.grid(H200, final=True) == 1


# --- rendering ---------------------------------------------------------------------------------

def test_render_is_deterministic_and_names_are_prefixed():
    spec = ew_spec((37, 53, 129), [((37, 1, 129), (0, 1, 2)), ((53, 129), (1, 2))])
    a, b = renderer.render(plan_kernel(spec)), renderer.render(plan_kernel(spec))
    assert a == b
    body = a[a.index('extern "C"'):]
    for name in re.findall(r"\b(?:const )?(?:int|float|long long) (\w+) =", body):
        assert name.startswith(("_", "v_", "o_", "ob_", "acc")), name


def test_templates_are_skeletons_with_an_example():
    env = renderer.ENV
    assert env.undefined.__name__ == "StrictUndefined" and env.trim_blocks and env.lstrip_blocks
    for name in os.listdir(renderer.TEMPLATE_DIR):
        text = open(os.path.join(renderer.TEMPLATE_DIR, name)).read()
        assert text.startswith("{#"), name
        assert text.count("{% if") <= 2, name


def test_literals():
    assert ops.literal(0.1, "float32") == "0.1f"
    assert ops.literal(1e20, "float32") == "1e+20f"
    assert ops.literal(float("inf"), "float32") == "fg_inff()"
    assert ops.literal(float("-inf"), "float64") == "(-fg_inf())"
    assert ops.literal(float("nan"), "float32") == "fg_nanf()"
    assert ops.literal(-2 ** 31, "int32") == "(-2147483647 - 1)"
    assert ops.literal(2 ** 32 - 1, "uint32") == "4294967295u"
    assert ops.literal(True, "bool") == "true"


def test_unsupported_dtype_is_reported():
    spec = ew_spec((8,), [full((8,))], "complex64")
    with pytest.raises(ops.Unsupported, match="complex64"):
        renderer.render(plan_kernel(spec))


def test_every_fusible_primitive_has_an_expression_or_is_complex_only():
    from funcgrad.core import Primitive
    missing = {p.name for p in Primitive.all_fusible() if p.kind == "elementwise"
               and p not in ops.CudaC.code_for_op}
    assert missing == {"real", "imag", "conj"}


def test_constants_are_typed_in_the_body():
    spec = dataclasses.replace(ew_spec((8,), [full((8,))]), body=(
        Instr("t0", "max", ("in0", Const(0.0, "float32")), "float32"),),
        outputs=(KernelOutput("out0", "t0", "float32", (8,)),))
    assert "fg_max(v_in0, 0.0f)" in renderer.render(plan_kernel(spec))


# --- goldens -----------------------------------------------------------------------------------

GOLDEN_CASES = ["ew_row_col_broadcast", "ew_vec_relu_bias", "sum_k5", "max_k1000",
                "sum_split_block", "float16_sum"]


@pytest.mark.parametrize("name", GOLDEN_CASES)
def test_golden_source(name):
    case = canonical.by_name(name)
    p, _, _ = case.build(np.random.default_rng(0))
    src = renderer.render(p)
    path = os.path.join(GOLDEN, f"{name}.cu")
    if os.environ.get("FUNCGRAD_REGEN_GOLDEN"):
        os.makedirs(GOLDEN, exist_ok=True)
        with open(path, "w") as f:
            f.write(src)
    with open(path) as f:
        assert src == f.read(), f"{name}: codegen changed; review and regenerate the golden"
