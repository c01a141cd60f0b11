"""`funcgrad.image`, JAX's `jax.image`: image resampling (`resize`, `scale_and_translate`)."""

from funcgrad.image.scale import ResizeMethod, resize, scale_and_translate

__all__ = ["ResizeMethod", "resize", "scale_and_translate"]
