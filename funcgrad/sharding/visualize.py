"""Text pictures of shardings: `visualize_sharding(shape, sharding)` and
`visualize_array_sharding(x)` (as `jax.debug`'s, in plain box-drawing text), and
`inspect_array_sharding`. Imports the sharding modules only.
"""

from funcgrad import errors
from funcgrad.core import Tracer
from funcgrad.sharding.arrays import sharding_of
from funcgrad.sharding.shardings import Sharding

__all__ = ["inspect_array_sharding", "visualize_array_sharding", "visualize_sharding"]


def _label(devices):
    platform = "CPU" if devices[0].platform == "cpu" else "GPU"
    return f"{platform} {','.join(str(d.id) for d in devices)}"


def _blocks(shape, sharding):
    """{(row block, column block): [devices]} and the sorted row and column starts."""
    grid = {}
    for device, index in sharding.devices_indices_map(tuple(shape)).items():
        key = tuple((s.start or 0) for s in index)
        grid.setdefault(key, []).append(device)
    rows = sorted({k[0] for k in grid}) if shape else [0]
    cols = sorted({k[1] for k in grid}) if len(shape) == 2 else [0]
    return grid, rows, cols


def render_sharding(shape, sharding, min_width=9, max_width=80):
    """The picture `visualize_sharding` prints, as a string."""
    if len(shape) not in (1, 2):
        raise errors.FuncgradValueError(
            f"visualize_sharding: only 1-d and 2-d arrays can be drawn, got shape "
            f"{tuple(shape)}\n{errors.where(errors.user_frame(3))}")
    grid, rows, cols = _blocks(shape, sharding)
    if len(shape) == 1:  # one row of column blocks
        grid = {(0, k[0]): v for k, v in grid.items()}
        rows, cols = [0], sorted({k[1] for k in grid})
    labels = {k: _label(v) for k, v in grid.items()}
    width = min(max(min_width, max(len(t) for t in labels.values()) + 4),
                max(min_width, max_width // max(len(cols), 1)))
    line = lambda left, mid, right: left + mid.join("─" * width for _ in cols) + right  # noqa
    out = [line("┌", "┬", "┐")]
    for i, r in enumerate(rows):
        out.append("│" + "│".join(labels[(r, c)].center(width)[:width] for c in cols) + "│")
        out.append(line("├", "┼", "┤") if i + 1 < len(rows) else line("└", "┴", "┘"))
    return "\n".join(out)


def visualize_sharding(shape, sharding, *, use_color=True, scale=1.0, min_width=9,
                       max_width=80, color_map=None):
    """Print which device holds which block of an array of `shape` laid out as `sharding`
    (1-d and 2-d shapes; `use_color`, `scale` and `color_map` are accepted and ignored: the
    picture is plain text).

    Example:
        >>> visualize_sharding((4, 2), SingleDeviceSharding(fg.devices()[0]))
        ┌───────────┐
        │   CPU 0   │
        └───────────┘
    """
    if not isinstance(sharding, Sharding):
        raise errors.FuncgradTypeError(f"visualize_sharding: expected a Sharding, got "
                                       f"{type(sharding).__name__}\n{errors.where()}")
    print(render_sharding(tuple(shape), sharding, min_width, max_width))


def visualize_array_sharding(arr, **kwargs):
    """Print which device holds which block of the concrete array `arr`.

    Example:
        >>> fg.debug.visualize_array_sharding(fnp.ones(4))
        ┌───────────┐
        │   CPU 0   │
        └───────────┘
    """
    if isinstance(arr, Tracer):
        raise errors.FuncgradTypeError(
            f"visualize_array_sharding: got a traced value {arr.aval}; funcgrad knows the "
            f"layout of concrete arrays only\n{errors.where()}\n  hint: call it outside jit, "
            "on the function's inputs or results.")
    visualize_sharding(arr.shape, sharding_of(arr), **kwargs)


def inspect_array_sharding(value, *, callback):
    """Call `callback(sharding)` for each array of pytree `value` (concrete arrays: their
    sharding; traced ones: None, since under `jit` the layout is the compiler's)."""
    from funcgrad.tree_util import tree_leaves
    for x in tree_leaves(value):
        callback(None if isinstance(x, Tracer) else sharding_of(x))
