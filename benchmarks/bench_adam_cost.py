"""What the Adam update's C loop costs, by how it divides: is it memory- or divider-bound?

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE PYTHONPATH=. \
        python benchmarks/bench_adam_cost.py [--threads 1]

Compiles one C program with the native backend's compiler and flags (`build.compiler()`) and
times, best of 50 and median, over the largest array of the Adam benchmark (784x512 float32,
in place, hot in cache): a loop moving the same seven streams (read p, m, v, g; write p, m,
v), the loop the native backend generates for the optax formula (`m / (1 - b1^t)`,
`v / (1 - b2^t)`, `lr * m_hat / (sqrt(v_hat) + eps)`: three divisions and a square root per
element), PyTorch's fused formula (`step_size * m / (sqrt(v) / sqrt(bc2) + eps)`: two
divisions), and the optax one with its two divisions by constants as multiplications by the
reciprocals (not exact, so funcgrad does not do it: a bound for what dividing costs).
"""


HARNESS = r"""
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#define N (784 * 512)
#define LOOP(name, ...) \
__attribute__((noinline)) void name(float *restrict p, float *restrict m, float *restrict v, \
                                    const float *restrict g) { \
    _Pragma("omp parallel for") for (long long b = 0; b < N; b += 16384) { \
        const long long e = b + 16384 < N ? b + 16384 : N; \
        _Pragma("omp simd") for (long long i = b; i < e; ++i) { __VA_ARGS__ } } }
LOOP(k_copy, m[i] = m[i] + g[i]; v[i] = v[i] + g[i]; p[i] = p[i] + g[i];)
LOOP(k_optax,
     const float mi = 0.9f * m[i] + 0.1f * g[i], vi = 0.999f * v[i] + (0.001f * g[i]) * g[i];
     const float mh = mi / 0.65132153f, vh = vi / 0.009955119f;
     m[i] = mi; v[i] = vi; p[i] = p[i] - (0.001f * mh) / (sqrtf(vh) + 1e-08f);)
LOOP(k_torch,
     const float mi = 0.9f * m[i] + 0.1f * g[i], vi = 0.999f * v[i] + (0.001f * g[i]) * g[i];
     m[i] = mi; v[i] = vi;
     p[i] = p[i] - 0.0015353399f * mi / (sqrtf(vi) / 0.09977534f + 1e-08f);)
LOOP(k_recip,
     const float mi = 0.9f * m[i] + 0.1f * g[i], vi = 0.999f * v[i] + (0.001f * g[i]) * g[i];
     const float mh = mi * (1.0f / 0.65132153f), vh = vi * (1.0f / 0.009955119f);
     m[i] = mi; v[i] = vi; p[i] = p[i] - (0.001f * mh) / (sqrtf(vh) + 1e-08f);)
typedef void (*kern)(float *, float *, float *, const float *);
static double now(void) {
    struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + 1e-9 * t.tv_nsec;
}
static int cmp(const void *p, const void *q) {
    const double a = *(const double *)p, b = *(const double *)q; return (a > b) - (a < b);
}
int main(void) {
    float *a[4];
    for (int k = 0; k < 4; ++k) {
        a[k] = aligned_alloc(64, 4 * N);
        for (long long i = 0; i < N; ++i) a[k][i] = k == 3 ? 1e-3f * (float)(i % 13) : 0.0f;
    }
    kern ks[] = {k_copy, k_optax, k_torch, k_recip};
    const char *names[] = {"seven streams, no arithmetic", "optax formula (3 div + sqrt)",
                           "PyTorch fused formula (2 div + sqrt)",
                           "optax, divisions by constants as products (1 div + sqrt)"};
    double base = 0;
    printf("| loop | best us | median us | vs seven streams |\n| --- | ---: | ---: | ---: |\n");
    for (int k = 0; k < 4; ++k) {
        double t[50];
        for (int r = 0; r < 50; ++r) {
            const double s = now();
            ks[k](a[0], a[1], a[2], a[3]);
            t[r] = now() - s;
        }
        qsort(t, 50, sizeof(double), cmp);
        if (k == 0) base = t[0];
        printf("| %s | %.1f | %.1f | %.2fx |\n", names[k], 1e6 * t[0], 1e6 * t[25], t[0] / base);
    }
    return 0;
}
"""


def main():
    from bench_tanh_cost import run_harness
    run_harness(HARNESS, "adam_cost", __doc__.splitlines()[0])


if __name__ == "__main__":
    main()
