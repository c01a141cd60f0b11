"""Argument promotion shared by the distributions (JAX's `promote_args_inexact`)."""

import funcgrad.numpy as fnp


def promote(*args):
    """The arguments as arrays of one float dtype, broadcast against each other."""
    xs = [fnp.asarray(a) for a in args]
    dt = fnp.result_type(*xs, 1.0)
    return fnp.broadcast_arrays(*[x.astype(dt) for x in xs])
