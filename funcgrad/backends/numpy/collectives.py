"""The numpy backend's collectives: mpi4py buffer calls written into the generated code.

    psum/pmax/pmin of one array   comm.Allreduce(IN_PLACE, b3, op=SUM) when the operand's
                                  buffer dies here (the memory plan puts the result in it),
                                  else comm.Allreduce(x, out) into a planned buffer
    a bucket (several operands)   one Allreduce per dtype on a packed buffer; the results
                                  are views of it (`Communicator.allreduce_many`)
    all_gather (axis 0)           comm.Allgather(x, out)
    psum_scatter (dimension 0)    comm.Reduce_scatter_block(x, out, op=SUM)
    pvary                         nothing (the result is the operand)
    axis_index                    the rank, a constant of the program

Other layouts and dtypes MPI cannot reduce go through the communicator's methods (which
move axes and widen dtypes). The communicator of each axis name is looked up when the
program is compiled and bound into it as a constant. The per-call shape check of
shard_map (`shard_map_check`) is a plain library call.
"""

import functools

import numpy as np

from funcgrad.backends.numpy import ops
from funcgrad.backends.numpy.render import higher_order_rules
from funcgrad.compiler import memory
from funcgrad.core import Literal
from funcgrad.distributed.comm import wire_dtype
from funcgrad.lax import parallel


def _comm(eqn):
    """The communicator of the equation's (single remaining) axis."""
    return parallel.communicator(eqn.params["axis_name"][0], eqn.prim.name)


def _native(aval):
    return wire_dtype(aval.dtype) == aval.dtype


# --- psum, pmax, pmin -------------------------------------------------------------------------

def _direct_allreduce(eqn):
    x = eqn.invars[0]
    return (len(eqn.invars) == 1 and len(eqn.params["axis_name"]) == 1
            and type(x) is not Literal and _native(x.aval))


def _allreduce_rule(op):
    def rule(r, eqn):
        if not _direct_allreduce(eqn):
            comms = [parallel.communicator(n, eqn.prim.name) for n in eqn.params["axis_name"]]
            f = r.constant(functools.partial(_allreduce_many, comms, op),
                           f"_{ops.ident(eqn.prim.name)}_")
            args = ", ".join(r.read(a) for a in eqn.invars)
            return [f"{', '.join(r.output_names(eqn))}, = {f}({args})"]
        comm = _comm(eqn)
        mpi, mop = r.constant(comm.mpi, "_comm"), r.constant(comm.ops[op], "_op")
        out = eqn.outvars[0]
        slot = r.plan.slots.get(out)
        if slot is not None and slot.action == "inplace":
            inplace = r.constant(comm.IN_PLACE, "_IN_PLACE")
            return [f"{mpi}.Allreduce({inplace}, {r.name_of(out)}, op={mop})"]
        name, lines = r.planned_buffer(out, out.aval.shape, out.aval.dtype)
        src = f"np.ascontiguousarray({r.read(eqn.invars[0])})"
        return lines + [f"{mpi}.Allreduce({src}, {name}, op={mop})"]

    def plan(eqn):
        if _direct_allreduce(eqn):
            return memory.ANY_BUFFER, [eqn.invars[0]]
        return memory.ALIAS, ()
    rule.plan = plan
    return rule


def _allreduce_many(comms, op, *xs):
    for comm in comms:
        xs = comm.allreduce_many(xs, op)
    return xs


higher_order_rules[parallel.psum_p] = _allreduce_rule("sum")
higher_order_rules[parallel.pmax_p] = _allreduce_rule("max")
higher_order_rules[parallel.pmin_p] = _allreduce_rule("min")


# --- all_gather, psum_scatter -----------------------------------------------------------------

def _direct_block(eqn, dim_param):
    x = eqn.invars[0]
    return type(x) is not Literal and _native(x.aval) and eqn.params[dim_param] == 0


def _all_gather_rule(r, eqn):
    x, out = eqn.invars[0], eqn.outvars[0]
    comm = _comm(eqn)
    if not _direct_block(eqn, "axis"):
        p = eqn.params
        f = r.constant(functools.partial(_all_gather, comm, p["axis"], p["tiled"]), "_gather")
        return [f"{r.name_of(out)} = {f}({r.read(x)})"]
    mpi = r.constant(comm.mpi, "_comm")
    name, lines = r.planned_buffer(out, out.aval.shape, out.aval.dtype)
    return lines + [f"{mpi}.Allgather(np.ascontiguousarray({r.read(x)}), {name})"]


def _all_gather(comm, axis, tiled, x):
    return parallel._place_gathered(np, comm.allgather(x), axis, tiled)


_all_gather_rule.plan = lambda eqn: ((memory.FREE_BUFFER, ()) if _direct_block(eqn, "axis")
                                     else (memory.ALIAS, ()))
higher_order_rules[parallel.all_gather_p] = _all_gather_rule


def _psum_scatter_rule(r, eqn):
    x, out = eqn.invars[0], eqn.outvars[0]
    comm = _comm(eqn)
    if not _direct_block(eqn, "scatter_dimension"):
        p = {k: v for k, v in eqn.params.items() if k != "axis_name"}
        f = r.constant(functools.partial(_psum_scatter, comm, p), "_scatter")
        return [f"{r.name_of(out)} = {f}({r.read(x)})"]
    mpi, mop = r.constant(comm.mpi, "_comm"), r.constant(comm.ops["sum"], "_op")
    name, lines = r.planned_buffer(out, out.aval.shape, out.aval.dtype)
    src = f"np.ascontiguousarray({r.read(x)})"
    return lines + [f"{mpi}.Reduce_scatter_block({src}, {name}, op={mop})"]


def _psum_scatter(comm, params, x):
    d, n = params["scatter_dimension"], params["axis_size"]
    block = comm.reduce_scatter(parallel._blocks_first(np, np.asarray(x), d, n), "sum")
    out = np.moveaxis(block, 0, d) if block.ndim else block
    return np.ascontiguousarray(out).reshape(
        parallel._scattered_shape(np.shape(x), d, params["tiled"], n))


_psum_scatter_rule.plan = lambda eqn: ((memory.FREE_BUFFER, ())
                                       if _direct_block(eqn, "scatter_dimension")
                                       else (memory.ALIAS, ()))
higher_order_rules[parallel.psum_scatter_p] = _psum_scatter_rule


# --- pvary, axis_index ------------------------------------------------------------------------

def _pvary_rule(r, eqn):
    return [f"{o} = {r.read(a)}" for o, a in zip(r.output_names(eqn), eqn.invars)]


def _axis_index_rule(r, eqn):
    rank = _comm(eqn).rank
    return [f"{r.name_of(eqn.outvars[0])} = np.int32({rank})"]


higher_order_rules[parallel.pvary_p] = _pvary_rule
higher_order_rules[parallel.axis_index_p] = _axis_index_rule
