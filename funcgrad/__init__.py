"""funcgrad: pure functions on arrays, traced to a small typed IR and transformed.

    import funcgrad as fg
    import funcgrad.numpy as fnp
    fg.grad(lambda x: fnp.sin(x).sum())(fnp.ones(3))
"""

from funcgrad import lax, tree_util  # noqa: F401
from funcgrad.api import grad, jvp, linearize, make_jaxpr, value_and_grad, vjp  # noqa: F401
from funcgrad.config import config  # noqa: F401
from funcgrad.core import Array  # noqa: F401

__version__ = "0.1.0"
