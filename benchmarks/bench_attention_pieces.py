"""Two pieces of a transformer step on the native tier, next to numpy: the exp of a causal
softmax (half its logits masked) and the gradient of an embedding lookup (a scatter-add).

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE OMP_NUM_THREADS=1 PYTHONPATH=. \\
        python benchmarks/bench_attention_pieces.py [--repeat 200]

`exp`: fnp.exp on f32[16, 4, 64, 64] (the GPT step's attention weights) whose masked half
holds -inf, finfo.min (as `nn.MultiHeadAttention` masks), -95 (results subnormal) or
nothing, against np.exp on the same array. `embedding grad`: value_and_grad of
sum(tanh(emb[tokens])^2) for a 64x128 table and 16x64 tokens (the GPT step's), native and
numpy tiers. Medians of single calls, microseconds, one process.
"""

import argparse
import time

import numpy as np

import funcgrad as fg
import funcgrad.numpy as fnp


def median_us(fn, repeat):
    for _ in range(5):
        fn()
    ts = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return float(np.median(ts)) * 1e6


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=200)
    args = ap.parse_args()
    fg.config.update("native", "sync")
    rng = np.random.default_rng(0)
    x = rng.normal(size=(16, 4, 64, 64)).astype(np.float32)
    causal = np.tril(np.ones((64, 64), bool))
    exp = fg.jit(lambda x: fnp.exp(x))
    print("| input | native exp us | np.exp us |\n| --- | ---: | ---: |")
    for name, fill in (("finite", None), ("masked -inf", -np.inf),
                       ("masked finfo.min", np.finfo(np.float32).min),
                       ("masked -95 (subnormal results)", -95.0)):
        v = x if fill is None else np.where(causal, x, fill).astype(np.float32)
        ours = median_us(lambda v=v: fg.block_until_ready(exp(v)), args.repeat)
        theirs = median_us(lambda v=v: np.exp(v), args.repeat)
        print(f"| {name} | {ours:.0f} | {theirs:.0f} |")
    emb = rng.normal(size=(64, 128)).astype(np.float32)
    toks = rng.integers(0, 64, size=(16, 64)).astype(np.int32)
    loss = lambda e, t: fnp.sum(fnp.tanh(e[t]) ** 2)
    print("\n| embedding grad | us |\n| --- | ---: |")
    for backend in ("cpu", "numpy"):
        step = fg.jit(fg.value_and_grad(loss), backend=backend)
        t = median_us(lambda step=step: fg.block_until_ready(step(emb, toks)), args.repeat)
        print(f"| {'native' if backend == 'cpu' else 'numpy tier'} | {t:.0f} |")


if __name__ == "__main__":
    main()
