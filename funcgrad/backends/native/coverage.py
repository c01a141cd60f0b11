"""What of a program runs in C on the native tier, per primitive: the one table.

A jitted program on the native tier is one C function when every operation of it has a C
form; an operation without one runs as the numpy backend's Python statement between two C
calls. `FORMS` says, for every primitive that is not a fused kernel's (elementwise and fusible
reductions print inside kernels, except what `ops.NativeC.unfused` lists), which form it takes:

- `VIEW`: no code, C reads the operand at an offset with strides (`views.View`), as the
  numpy backend's view does;
- `MATMUL`: `np.matmul`'s own BLAS calls or loops, in C (`matmul.Matmul`);
- `ROUTINE`: a C routine of the equation (`linalg.py`, `shapes.py`, `along_axis.py`,
  `windows.py`, `conv.py`), with the limits each states (sizes, dtypes; beyond them the
  equation runs in Python);
- `LOOP`: a C loop or branch whose bodies print in C (`loops.CLoop`);
- `PYTHON`: no C form yet, with the reason.

`NativeRenderer` dispatches through this table, and tests/test_native_program.py checks it
against what the renderer prints (a primitive listed with a C form that falls back for a
program within its limits fails) and that the issue-27 programs leave C nowhere. Imports lax
and the native tables only.
"""

from funcgrad import lax
from funcgrad.backends.native import along_axis, conv, linalg, shapes, windows
from funcgrad.lax import control_flow

VIEW, MATMUL, ROUTINE, LOOP, PYTHON = "view", "matmul", "routine", "loop", "python"


def _view_forms():
    return {lax.reshape_p: "reshape", lax.squeeze_p: "reshape", lax.transpose_p: "transpose",
            lax.broadcast_in_dim_p: "broadcast", lax.slice_p: "slice", lax.rev_p: "flip"}


def _routines():
    return {**linalg.ROUTINES, **windows.ROUTINES, **along_axis.ROUTINES, **conv.ROUTINES,
            **{p: c for p, c in shapes.IN_LOOPS.items() if p not in _view_forms()}}


_CALLBACK = "calls back into Python by design"
_COLLECTIVE = "a collective: MPI/NCCL through Python (funcgrad.distributed)"
_NOT_YET = "no C routine yet (LAPACK/numpy through Python)"

# by primitive name: what has no C form yet, and why
PYTHON_REASONS = {
    "reduce_prod": "numpy pairs a product's factors otherwise at top level (C only inside "
                   "loops: `along_axis.Product`)",
    "reduce_and": "no C routine yet (numpy's np.all)",
    "reduce_or": "no C routine yet (numpy's np.any)",
    "cumlogsumexp": "no C routine yet (numpy's logaddexp.accumulate)",
    "qr": _NOT_YET, "qr_pivots": _NOT_YET, "eigh": _NOT_YET, "svd": _NOT_YET, "eig": _NOT_YET,
    "fft": "no C routine yet (numpy's pocketfft)",
    "select_and_gather_add": "no C routine yet",
    "scatter-mul": "no C routine yet", "scatter-min": "no C routine yet",
    "scatter-max": "no C routine yet",
    "iota": "no C routine yet (a constant: folded when the program is optimized)",
    "complex": "complex numbers have no C type in the native backend",
    "polygamma": "no C form yet (scipy's polygamma)",
    "optimization_barrier": "kept as a call by design (the compiler does not look through it)",
    **{n: "a call of a body: inlined by the compiler before the native tier sees it; one "
          "that stays runs its body compiled apart" for n in (
              "jit", "checkpoint", "checkpoint_lin", "custom_jvp_call", "custom_known_call",
              "custom_vjp_call", "custom_vjp_lin")},
    "name": "an identity (checkpoint_name) the optimizer drops",
    "stop_gradient": "an identity the optimizer drops",
    **{n: _COLLECTIVE for n in ("psum", "pmax", "pmin", "pvary", "all_gather", "psum_scatter",
                                "axis_index", "shard_map_check")},
    **{n: _CALLBACK for n in ("pure_callback", "debug_callback", "debug_print", "debug_log",
                              "debug_breakpoint")},
    # the long tail (issue 28)
    **{n: "no C form yet (a series or bit operation of the long tail: numpy through Python)"
       for n in ("bessel_i0e", "bessel_i1e", "zeta", "clz", "mulhi", "reduce_precision")},
    "reduce_xor": "no C routine yet (numpy's bitwise_xor.reduce)",
    "schur": _NOT_YET, "hessenberg": _NOT_YET,
    "rng_uniform": "draws from funcgrad's host generator (a stateful effect) by design",
}


def form(prim):
    """(form, detail) of primitive `prim` on the native tier: detail is the view's kind, the
    routine's class, or the reason it runs in Python."""
    views = _view_forms()
    if prim in views:
        return VIEW, views[prim]
    if prim is lax.dot_general_p:
        return MATMUL, "numpy's matmul: BLAS gemm/gemv/dot/syrk or its own loop"
    routines = _routines()
    if prim in routines:
        return ROUTINE, routines[prim]
    if prim in (control_flow.while_p, control_flow.scan_p, control_flow.cond_p):
        return LOOP, "loops.CLoop"
    return PYTHON, PYTHON_REASONS.get(prim.name, "no C form yet")
