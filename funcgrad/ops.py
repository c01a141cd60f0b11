"""`funcgrad.ops`, JAX's `jax.ops`: the segment reductions (they live in `funcgrad.segment`).

Not to be confused with `funcgrad.core.ops`, the core's registry of the few lax operations
the interpreters use.
"""

from funcgrad.segment import segment_max, segment_min, segment_prod, segment_sum

__all__ = ["segment_max", "segment_min", "segment_prod", "segment_sum"]
