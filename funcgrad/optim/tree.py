"""optax.tree: the functions of `optim.tree_utils` under optax's short names
(`optim.tree.add` is `optim.tree_utils.tree_add`, `optim.tree.norm` is `tree_norm`, ...).

Only names; the functions live in `optim.tree_utils` and `optim.tree_state`.
"""

from funcgrad.optim import tree_utils as _t

__all__ = [
    "add", "add_scale", "allclose", "batch_shape", "bias_correction", "cast", "cast_like",
    "clip", "conj", "div", "dtype", "full_like", "get", "get_all_with_path", "map_params",
    "max", "min", "mul", "norm", "ones_like", "random_like", "real", "scale", "set", "size",
    "split_key_like", "sub", "sum", "unwrap_random_key_data", "update_infinity_moment",
    "update_moment", "update_moment_per_elem_norm", "vdot", "where", "zeros_like",
]

add, add_scale, allclose = _t.tree_add, _t.tree_add_scale, _t.tree_allclose
batch_shape, bias_correction = _t.tree_batch_shape, _t.tree_bias_correction
cast, cast_like, clip, conj = _t.tree_cast, _t.tree_cast_like, _t.tree_clip, _t.tree_conj
div, dtype, full_like = _t.tree_div, _t.tree_dtype, _t.tree_full_like
get, get_all_with_path = _t.tree_get, _t.tree_get_all_with_path
map_params = _t.tree_map_params
max, min = _t.tree_max, _t.tree_min  # noqa: A001
mul, norm, ones_like = _t.tree_mul, _t.tree_norm, _t.tree_ones_like
random_like, real, scale = _t.tree_random_like, _t.tree_real, _t.tree_scale
set = _t.tree_set  # noqa: A001
size, split_key_like, sub = _t.tree_size, _t.tree_split_key_like, _t.tree_sub
sum = _t.tree_sum  # noqa: A001
unwrap_random_key_data = _t.tree_unwrap_random_key_data
update_infinity_moment = _t.tree_update_infinity_moment
update_moment = _t.tree_update_moment
update_moment_per_elem_norm = _t.tree_update_moment_per_elem_norm
vdot, where, zeros_like = _t.tree_vdot, _t.tree_where, _t.tree_zeros_like
