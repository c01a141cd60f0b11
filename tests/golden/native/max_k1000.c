/* kernel k0_max: [50, 1000], reduces axes [1] */
void fg_k0(const float *restrict p_in0, float *restrict p_out0) {
    for (long long i0 = 0; i0 < 50; ++i0) {
        float acc0 = (-fg_inff());
        int nan0 = 0;
        #pragma omp simd reduction(max:acc0) reduction(|:nan0)
        for (long long k0 = 0; k0 < 1000; ++k0) {
            const float v_in0 = p_in0[i0 * 1000 + k0];
            acc0 = v_in0 > acc0 ? v_in0 : acc0; nan0 |= v_in0 != v_in0;
        }
        if (acc0 == 0) {
            for (long long k0 = 999; k0 >= 0; --k0) {
                const float v_in0 = p_in0[i0 * 1000 + k0];
                if (v_in0 == 0) { acc0 = v_in0; goto fg_zero_acc0; }
            }
        }
        fg_zero_acc0:;
        p_out0[i0] = (float)(nan0 ? fg_nanf() : acc0);
    }
}
