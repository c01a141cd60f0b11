/* kernel k0_sum: [1000, 64], reduces axes [0] */
void fg_k0(const float *restrict p_in0, float *restrict p_out0) {
    for (long long _r = 0; _r < 64; _r += 256) {
        const long long _e = _r + 256 < 64 ? _r + 256 : 64;
        double acc0[256];
        for (long long i0 = _r; i0 < _e; ++i0) acc0[i0 - _r] = 0.0;
        for (long long k0 = 0; k0 < 1000; ++k0) {
            #pragma omp simd
            for (long long i0 = _r; i0 < _e; ++i0) {
                const float v_in0 = p_in0[i0 + k0 * 64];
                acc0[i0 - _r] = (acc0[i0 - _r] + (double)v_in0);
            }
        }
        for (long long i0 = _r; i0 < _e; ++i0) p_out0[i0] = (float)acc0[i0 - _r];
    }
}
