"""The memory plan's choices (compiler/memory.py), on programs written as `Step`s: which
buffer a result takes when two operands die, and how the packed workspace lays out values
the free pool chained into one buffer. (The plan's effect on whole programs:
tests/test_optim_inplace.py.)"""

import numpy as np

from funcgrad.compiler import memory
from funcgrad.compiler.memory import ANY_BUFFER, ARG, FREE_BUFFER, Step, Value


def _v(key, shape, kind=FREE_BUFFER):
    return Value(key, shape, np.float32, kind)


def _update_program():
    """g = f(x); p_new = p - lr * g, where both g and the donated p die."""
    p, x = _v("p", (4, 4), ARG), _v("x", (4, 4), ARG)
    steps = [Step([_v("g", (4, 4))], ["x"]),
             Step([_v("p_new", (4, 4), ANY_BUFFER)], ["g", "p"], ["g", "p"])]
    return steps, [p, x]


def test_a_packed_plan_writes_an_update_into_the_donated_argument():
    steps, args = _update_program()
    plan = memory.plan_memory(steps, args, outputs=["p_new"], donated=["p"],
                              workspace_min_bytes=0, pack_workspace=True)
    slot = plan.slots["p_new"]
    assert slot.action == "inplace" and plan.holders[slot.buffer][0] == "p"
    assert plan.analysis.alias_bytes == 64
    # the gradient's bytes are the workspace, the result costs nothing new
    assert plan.analysis.peak_bytes == 2 * 64 + 64, plan.analysis


def test_an_unpacked_plan_writes_an_update_into_the_dying_operand():
    # without packing, the gradient's buffer would stay a separate workspace array: the
    # result takes it, and the donated argument is left alone
    steps, args = _update_program()
    plan = memory.plan_memory(steps, args, outputs=["p_new"], donated=["p"],
                              workspace_min_bytes=0)
    slot = plan.slots["p_new"]
    assert slot.action == "inplace" and plan.holders[slot.buffer][0] == "g"
    assert plan.analysis.alias_bytes == 0


def test_packing_lays_out_values_the_pool_chained_by_their_own_lifetimes():
    # a (steps 0-1) and c (3-4) share a buffer through the pool; e (step 2 only) has another
    # shape of the same size: packed by the values' lifetimes, all three share 64 bytes
    x = _v("x", (4, 4), ARG)
    steps = [Step([_v("a", (4, 4))], ["x"]),
             Step([_v("r1", (2,))], ["a"]),
             Step([_v("e", (2, 8))], ["x"]),
             Step([_v("c", (4, 4))], ["x"]),
             Step([_v("r2", (2,))], ["c"])]
    plan = memory.plan_memory(steps, [x], outputs=["r1", "r2"], workspace_min_bytes=0,
                              pack_workspace=True)
    assert plan.slots["a"].buffer != plan.slots["c"].buffer
    assert plan.analysis.workspace_bytes == 64, plan.analysis
    unpacked = memory.plan_memory(steps, [x], outputs=["r1", "r2"], workspace_min_bytes=0)
    assert unpacked.slots["a"].buffer == unpacked.slots["c"].buffer  # the pool's chain
    assert unpacked.analysis.workspace_bytes == 128
