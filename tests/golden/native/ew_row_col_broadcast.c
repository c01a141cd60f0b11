/* kernel k0_mul_add_tanh: [37, 53, 129] */
static void fg_k0_task(void *const *fg_a, long long _t) {
    const float *restrict p_in0 = (const float *)fg_a[0];
    const float *restrict p_in1 = (const float *)fg_a[1];
    const float *restrict p_in2 = (const float *)fg_a[2];
    float *restrict p_out0 = (float *)fg_a[3];
    const long long _lo = _t * 3, _hi = _lo + 3 < 37 ? _lo + 3 : 37;
    for (long long i0 = _lo; i0 < _hi; ++i0) {
        for (long long i1 = 0; i1 < 53; ++i1) {
            #pragma omp simd
            for (long long i2 = 0; i2 < 129; ++i2) {
                const float v_in0 = p_in0[i0 * 129 + i2];
                const float v_in1 = p_in1[i1 * 129 + i2];
                const float v_in2 = p_in2[i2];
                const float v_t0 = (v_in0 * v_in1);
                const float v_t1 = (v_t0 + v_in2);
                const float v_t2 = fg_tanhf(v_t1);
                p_out0[i0 * 6837 + i1 * 129 + i2] = v_t2;
            }
        }
    }
}
void fg_k0(const float *restrict p_in0, const float *restrict p_in1, const float *restrict p_in2, float *restrict p_out0) {
    void *const fg_a[] = {(void *)p_in0, (void *)p_in1, (void *)p_in2, (void *)p_out0};
    fg_parallel(fg_k0_task, fg_a, 13);
}
