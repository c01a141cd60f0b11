"""`summary(params)`: a table of a parameter pytree's paths, shapes, dtypes, counts and bytes.

Uses `tree_util.tree_flatten_with_path` and `keystr`, so the paths are those an optimizer
mask or a checkpoint sees. Imports only `tree_util` and numpy.
"""

import numpy as np

from funcgrad.tree_util import keystr, tree_flatten_with_path

__all__ = ["count_params", "summary"]


def count_params(tree):
    """The total number of array elements in `tree`.

    Example: ``count_params({'w': fnp.ones((3, 2)), 'b': fnp.ones(2)})`` is ``8``.
    """
    leaves, _ = tree_flatten_with_path(tree)
    return int(sum(np.prod(np.shape(x), dtype=np.int64) for _, x in leaves))


def _fmt_bytes(n):
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024


def summary(params, title="params"):
    """A text table with one row per leaf (path, shape, dtype, count, bytes) and a total.

    Args:
        params: any pytree of arrays (parameters, state, optimizer state).
        title: the header of the path column.

    Returns:
        The table as a string (`print(nn.summary(params))`).

    Example:
        >>> print(summary({'w': fnp.ones((3, 2)), 'b': fnp.ones(2)}))
        params  shape   dtype    count  bytes
        ['b']   (2,)    float32      2  8 B
        ['w']   (3, 2)  float32      6  24 B
        total                        8  32 B
    """
    leaves, _ = tree_flatten_with_path(params)
    rows = [(title, "shape", "dtype", "count", "bytes")]
    total_n = total_b = 0
    for path, x in leaves:
        shape, dtype = tuple(np.shape(x)), np.dtype(getattr(x, "dtype", np.asarray(x).dtype))
        n = int(np.prod(shape, dtype=np.int64))
        total_n, total_b = total_n + n, total_b + n * dtype.itemsize
        rows.append((keystr(path) or "(root)", str(shape), dtype.name, str(n),
                     _fmt_bytes(n * dtype.itemsize)))
    rows.append(("total", "", "", str(total_n), _fmt_bytes(total_b)))
    widths = [max(len(r[i]) for r in rows) for i in range(5)]
    lines = []
    for r in rows:
        cells = [r[0].ljust(widths[0]), r[1].ljust(widths[1]), r[2].ljust(widths[2]),
                 r[3].rjust(widths[3]), r[4]]
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines)
