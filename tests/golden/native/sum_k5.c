/* kernel k0_mul: [2000, 5], reduces axes [1] */
void fg_k0(const float *restrict p_in0, float *restrict p_out0) {
    for (long long i0 = 0; i0 < 2000; ++i0) {
        double acc0 = 0.0;
        #pragma omp simd reduction(+:acc0)
        for (long long k0 = 0; k0 < 5; ++k0) {
            const float v_in0 = p_in0[i0 * 5 + k0];
            const float v_t0 = (v_in0 * 2.0f);
            acc0 = (acc0 + (double)v_t0);
        }
        p_out0[i0] = (float)acc0;
    }
}
