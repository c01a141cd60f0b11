"""Training curves for the examples: a PNG when matplotlib is installed, one line of text always.

    from _curves import curves_path, report_curves
    report_curves(curves_path("train_digits_mlp", args.curves),
                  {"loss": {"train": losses}, "accuracy": {"test": (epochs, accs)}})

A panel is a dict of named series; a series is a list of values (x = 1, 2, ...) or a pair
`(xs, ys)`. matplotlib is optional (`pip install funcgrad[examples]`); it is drawn through its
object-oriented API (`Figure` + the Agg canvas), so no global pyplot state is touched.
"""

import os

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "out")


def curves_path(example, path=None):
    """Where `example` writes its curves: `path`, or `examples/out/<example>_curves.png`;
    "" (from `--curves ""`) means no PNG."""
    if path is not None:
        return path or None
    return os.path.join(OUT, f"{example}_curves.png")


def _xy(series):
    if isinstance(series, tuple) and len(series) == 2:
        return [float(x) for x in series[0]], [float(y) for y in series[1]]
    ys = [float(y) for y in series]
    return list(range(1, len(ys) + 1)), ys


def summary(panels):
    """One line: every series' first and last value, e.g. `loss: train 2.3 -> 0.05 (20 points)`."""
    parts = []
    for panel, series in panels.items():
        items = []
        for name, s in series.items():
            _, ys = _xy(s)
            if len(set(ys)) == 1:  # one point, or a constant baseline
                items.append(f"{name} {ys[0]:.4g}")
            elif ys:
                items.append(f"{name} {ys[0]:.4g} -> {ys[-1]:.4g} ({len(ys)} points)")
        parts.append(f"{panel}: " + ", ".join(items))
    return "; ".join(parts)


def write_png(path, panels, title="", xlabel="step"):
    """Draws one subplot per panel into `path`; returns False when matplotlib is missing."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        return False
    fig = Figure(figsize=(5 * len(panels), 3.6), layout="constrained")
    FigureCanvasAgg(fig)
    for ax, (panel, series) in zip(fig.subplots(1, len(panels), squeeze=False)[0],
                                   panels.items()):
        for name, s in series.items():
            xs, ys = _xy(s)
            ax.plot(xs, ys, label=name, marker="." if len(ys) < 30 else None)
        values = [y for s in series.values() for y in _xy(s)[1]]
        if min(values) > 0 and max(values) > 30 * min(values):
            ax.set_yscale("log")  # losses falling over decades
        ax.set_xlabel(xlabel)
        ax.set_ylabel(panel)
        ax.grid(alpha=0.3)
        ax.legend()
    if title:
        fig.suptitle(title)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path, dpi=110)
    return True


def report_curves(path, panels, title="", xlabel="step"):
    """Writes the PNG (when `path` is set and matplotlib is installed) and prints one line.

    Returns the PNG's path, or None when none was written.
    """
    written = path is not None and write_png(path, panels, title, xlabel)
    where = (f"PNG: {path}" if written else "no PNG: pip install matplotlib" if path
             else "no PNG asked")
    print(f"curves: {summary(panels)} [{where}]")
    return path if written else None
