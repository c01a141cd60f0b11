/* kernel k0_mul_add_tanh: [37, 53, 129] */
void fg_k0(const float *restrict p_in0, const float *restrict p_in1, const float *restrict p_in2, float *restrict p_out0) {
    #pragma omp parallel for
    for (long long i0 = 0; i0 < 37; ++i0) {
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
