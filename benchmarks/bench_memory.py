"""Memory of a jitted step: `memory_analysis()` of each program and its process's RSS.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE PYTHONPATH=. python benchmarks/bench_memory.py \
        [--only gp7 logjoint ...] [--backend cpu|numpy] [--steps 3000]

For each program of the issue-27 set (programs_small.py) and ilqr, rnn, adam
(bench_native_programs.py), on the native tier ("cpu", built synchronously) or the numpy
backend: the predicted peak, temporaries and workspace bytes, and, with `--steps N`, the
VmRSS (KiB) of a fresh process after 20 warm steps and after N more (one process per program,
so the numbers are that program's alone; the process's RSS after `import funcgrad` is printed
first for scale).
"""

import argparse
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
PROGRAMS = ("gp7", "logjoint", "advivmap", "maml", "mnist", "cnn", "ilqr", "rnn", "adam")


def rss_kib():
    with open("/proc/self/status") as f:
        return int(next(line for line in f if line.startswith("VmRSS")).split()[1])


def build(name, backend):
    import bench_native_programs as b
    import programs_small as ps

    import funcgrad as fg
    fg.config.update("native", "sync")
    spec = ps.SPECS.get(name) or getattr(b, f"{name}_spec")
    make, args, donate, n_state = spec()[:4]
    jitted = fg.jit(make(b.namespace("funcgrad")), backend=backend, donate_argnums=donate)
    return jitted, args, n_state


def analysis(name, backend):
    jitted, args, _ = build(name, backend)
    m = jitted.lower(*args).compile().memory_analysis()
    return m.peak_bytes, m.temp_bytes, m.workspace_bytes


def rss(name, backend, steps):
    import bench_native_programs as b
    jitted, args, n_state = build(name, backend)
    step = b.runner(jitted, args, n_state)
    for _ in range(20):
        step()
    warm = rss_kib()
    for _ in range(steps):
        step()
    return warm, rss_kib()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="+", choices=PROGRAMS, default=list(PROGRAMS))
    ap.add_argument("--backend", choices=("cpu", "numpy"), default="cpu")
    ap.add_argument("--steps", type=int, default=0, help="RSS after this many more steps")
    ap.add_argument("--child", nargs=2, metavar=("NAME", "WHAT"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        name, what = args.child
        out = (analysis(name, args.backend) if what == "analysis"
               else rss(name, args.backend, args.steps))
        print(" ".join(map(str, out)))
        return
    base = subprocess.run([sys.executable, "-c", "import funcgrad; import bench_memory as m;"
                           " print(m.rss_kib())"], cwd=HERE, capture_output=True, text=True)
    print(f"backend {args.backend}; VmRSS after `import funcgrad`: {base.stdout.strip()} KiB\n")
    head = "| program | peak bytes | temporaries | workspace |"
    head += f" RSS after 20 steps | after {args.steps} more |" if args.steps else ""
    print(head)
    print("| --- |" + " ---: |" * (head.count("|") - 2))
    for name in args.only:
        row = [name]
        for what in ("analysis", "rss") if args.steps else ("analysis",):
            r = subprocess.run([sys.executable, __file__, "--backend", args.backend, "--steps",
                                str(args.steps), "--child", name, what],
                               capture_output=True, text=True)
            row += r.stdout.split() if r.returncode == 0 else ["error"]
        print("| " + " | ".join(row) + " |", flush=True)


if __name__ == "__main__":
    main()
