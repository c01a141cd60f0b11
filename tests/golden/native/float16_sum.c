/* kernel k0_sum: [64, 300], reduces axes [1] */
void fg_k0(const fg_half *restrict p_in0, fg_half *restrict p_out0) {
    for (long long i0 = 0; i0 < 64; ++i0) {
        double acc0 = 0.0;
        #pragma omp simd reduction(+:acc0)
        for (long long k0 = 0; k0 < 300; ++k0) {
            const float v_in0 = fg_h2f(p_in0[i0 * 300 + k0]);
            acc0 = (acc0 + (double)v_in0);
        }
        p_out0[i0] = fg_f2h((float)fg_round_half_d(acc0));
    }
}
