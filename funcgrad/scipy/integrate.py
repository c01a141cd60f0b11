"""`funcgrad.scipy.integrate`: `trapezoid`, as `jax.scipy.integrate` (the very function of
`funcgrad.numpy`: one home).

    >>> trapezoid(fnp.array([1.0, 2.0, 3.0]))
    Array(4., dtype=float32)
"""

from funcgrad.numpy.calculus import trapezoid

__all__ = ["trapezoid"]
