/* kernel k0_add_max: [64, 256] */
void fg_k0(const float *restrict p_in0, const float *restrict p_in1, float *restrict p_out0) {
    for (long long i0 = 0; i0 < 64; ++i0) {
        #pragma omp simd
        for (long long i1 = 0; i1 < 256; ++i1) {
            const float v_in0 = p_in0[i0 * 256 + i1];
            const float v_in1 = p_in1[i1];
            const float v_t0 = (v_in0 + v_in1);
            const float v_t1 = fg_max(v_t0, 0.0f);
            p_out0[i0 * 256 + i1] = v_t1;
        }
    }
}
