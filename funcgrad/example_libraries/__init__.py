"""JAX's example libraries on funcgrad: `stax` (layers as `(init_fun, apply_fun)` pairs) and
`optimizers` (`(init_fun, update_fun, get_params)` triples), with JAX's names and semantics,
so programs written against `jax.example_libraries` run unchanged."""

from funcgrad.example_libraries import optimizers, stax

__all__ = ["optimizers", "stax"]
