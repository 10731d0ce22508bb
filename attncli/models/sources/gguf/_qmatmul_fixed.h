/* One token's product on integers, float32 numerics (included once per vector level, after
 * _qmatmul_q8.h): Q4_K's and Q6_K's rows against the token's values in fixed point (fix_rows,
 * in _qmatmul.c: each block of 256 values as integers K = x·2^(29−E), E the exponent of the
 * block's largest |x|, |K| <= 2^29, split into two 16-bit digits K = D0 + 2^15·D1).
 *
 * A Q4_K group's weights are d·sc·q − dmin·m (sc, m six-bit, q four-bit), so a block adds
 *   s·(d·Σ_g sc_g·Σ q·K − dmin·Σ_g m_g·ΣK_g),  s = 2^(E−29),
 * and a Q6_K block s·d·Σ_g sc_g·Σ (q − 32)·K (sc eight-bit signed, q six-bit). The sums are
 * exact integers: the int16 weight sc·q or sc·(q − 32) (|·| <= 945 or 4,096) by each digit, in
 * pairs of products summed into int32 lanes (vpdpwssd, or vpmaddwd and an add; every lane's
 * sum over a block stays below 2^31, each kernel says why), and Q4_K's mins' sum exact in
 * float64 from the block's per-group ΣK. Each lane's sum, times d·s (exact in float64), is
 * added into float64 lanes block after block (AVX-512 adds the mins' terms, times −dmin·s,
 * into them too; the other levels sum them apart and take them off at the end); the row's
 * result is rounded once to float32.
 *
 * So against dequantize-then-float32-matmul: the weights are exact where the dequantizer may
 * round each (Q4_K's fl(dl·q − ml), within 2^-24·|w|), the sums are exact or float64, and each
 * value of x is exact where it is within 2^-5 of its block's largest (24 bits) and otherwise
 * within half a step of the grid 2^(E−29), at most 2^-29 of that largest (x rounded to the
 * integer grid): within BOUND of Σ|w·x| for any block whose largest value is not 2^14 times its
 * typical one (a value 2^14 times smaller than its block's largest keeps about 15 bits, where
 * float32 keeps 24). A block with an inf or NaN d or
 * dmin is dequantized and added in float32, so its inf or NaN is the reference's; an x with
 * inf or NaN does not come here (fix_rows refuses it, and the float32 chunk path takes it).
 */

/* A block whose scale is inf or NaN (KIND's index: Q4_K 8, Q6_K 10): dequantized, every weight
 * inf or NaN as the reference's, and added in float32. */
static float LV(block_dot)(int index, const uint8_t *b, const float *x) {
    float buf[QK_K], sum = 0.0f;
    LV(DEQUANT)[index](b, buf, 1);
    for (int k = 0; k < QK_K; k++) sum += buf[k] * x[k];
    return sum;
}

/* Group g's six-bit scale from scale_min_k_words' word sc. */
#define SCALE(g) ((int16_t)((sc >> (8 * (g))) & 0xFF))

/* A Q4_K block's d and dmin; 1 (its product added to special) where either is inf or NaN. */
static ALWAYS_INLINE int LV(q4_k_special)(const uint8_t *b, const float *x, float *d,
                                          float *dmin, float *special) {
    *d = LV(half)(b), *dmin = LV(half)(b + 2);
    if (isfinite(*d) && isfinite(*dmin)) return 0;
    *special += LV(block_dot)(8, b, x);
    return 1;
}

/* A Q6_K block's d; 1 (its product added to special) where it is inf or NaN. */
static ALWAYS_INLINE int LV(q6_k_special)(const uint8_t *b, const float *x, float *d,
                                          float *special) {
    *d = LV(half)(b + 208);
    if (isfinite(*d)) return 0;
    *special += LV(block_dot)(10, b, x);
    return 1;
}

#if defined(__AVX512F__)
#define FIXED_DOT(acc, a, b) _mm512_add_epi32(acc, _mm512_madd_epi16(a, b))
#define FIX(name) LV(name)
#include "_qmatmul_fixed_avx512.h"
#undef FIXED_DOT
#undef FIX
#if defined(X86_LEVELS)
#pragma GCC push_options
#pragma GCC target("avx512vnni")
#define FIXED_DOT(acc, a, b) _mm512_dpwssd_epi32(acc, a, b)
#define FIX(name) LV(name##_vnni)
#include "_qmatmul_fixed_avx512.h"
#undef FIXED_DOT
#undef FIX
#pragma GCC pop_options
#define FIXED_VNNI 1
#endif

#elif defined(__AVX2__)
/* Q4_K in AVX2: 16 values a vector, vpmaddwd pairs into 8 int32 lanes (a lane's 16 pair sums
 * per block are exact, below 2^30), each lane's sum to float64 times d·s. */
static void LV(fixed_q4_k)(const uint8_t *w, int64_t cols, const float *x, const uint8_t *xq,
                           float *y, int64_t r0, int64_t r1) {
    const int64_t blocks = cols / QK_K, row_bytes = blocks * 144;
    const __m256i low4 = _mm256_set1_epi16(0xF);
    for (int64_t r = r0; r < r1; r++) {
        const uint8_t *b = w + r * row_bytes;
        __m256d F = _mm256_setzero_pd();
        double mins = 0.0;
        float special = 0.0f;
        for (int64_t i = 0; i < blocks; i++, b += 144) {
            const uint8_t *fx = xq + i * FIX_BYTES;
            PREFETCH(b, 144);
            float d, dmin;
            if (LV(q4_k_special)(b, x + i * QK_K, &d, &dmin, &special)) continue;
            uint64_t sc, m;
            scale_min_k_words(b + 4, &sc, &m);
            const int16_t *d0 = (const int16_t *)fx, *d1 = (const int16_t *)(fx + FIX_D1);
            __m256i A0 = _mm256_setzero_si256(), A1 = A0;
            for (int c = 0; c < 4; c++)
                for (int h = 0; h < 2; h++) {  /* bytes 16h.. of the 32: values 64c + 16h.. */
                    const __m256i v = _mm256_cvtepu8_epi16(
                        _mm_loadu_si128((const __m128i *)(b + 16 + 32 * c + 16 * h)));
                    const __m256i lo = _mm256_mullo_epi16(_mm256_and_si256(v, low4),
                                                          _mm256_set1_epi16(SCALE(2 * c)));
                    const __m256i hi = _mm256_mullo_epi16(_mm256_srli_epi16(v, 4),
                                                          _mm256_set1_epi16(SCALE(2 * c + 1)));
                    const int64_t k = 64 * c + 16 * h;
#define DIGITS(p, k) _mm256_loadu_si256((const __m256i *)((p) + (k)))
                    A0 = _mm256_add_epi32(A0, _mm256_madd_epi16(lo, DIGITS(d0, k)));
                    A1 = _mm256_add_epi32(A1, _mm256_madd_epi16(lo, DIGITS(d1, k)));
                    A0 = _mm256_add_epi32(A0, _mm256_madd_epi16(hi, DIGITS(d0, k + 32)));
                    A1 = _mm256_add_epi32(A1, _mm256_madd_epi16(hi, DIGITS(d1, k + 32)));
#undef DIGITS
                }
            const double ds = (double)d * fix_scale(fx);
            const __m256d low = _mm256_set1_pd(ds), high = _mm256_set1_pd(ds * 32768.0);
            F = _mm256_fmadd_pd(_mm256_cvtepi32_pd(_mm256_castsi256_si128(A0)), low, F);
            F = _mm256_fmadd_pd(_mm256_cvtepi32_pd(_mm256_extracti128_si256(A0, 1)), low, F);
            F = _mm256_fmadd_pd(_mm256_cvtepi32_pd(_mm256_castsi256_si128(A1)), high, F);
            F = _mm256_fmadd_pd(_mm256_cvtepi32_pd(_mm256_extracti128_si256(A1, 1)), high, F);
            mins += (double)dmin * fix_scale(fx) * fixed_mins(fx, m);
        }
        double lanes[4];
        _mm256_storeu_pd(lanes, F);
        y[r] = (float)(((lanes[0] + lanes[2]) + (lanes[1] + lanes[3])) - mins) + special;
    }
}


/* Q6_K in AVX2: each quarter's 32 values a byte each less 32 (the AVX-512 kernel's bytes),
 * 16 at a time to int16 times their group's scale; a lane of a half's accumulators adds 8
 * pairs a block, |lane| <= 8·2·4096·32767 < 2^31, each half's lanes to float64 apart. */
static void LV(fixed_q6_k)(const uint8_t *w, int64_t cols, const float *x, const uint8_t *xq,
                           float *y, int64_t r0, int64_t r1) {
    const int64_t blocks = cols / QK_K, row_bytes = blocks * 210;
    const __m256i low4 = _mm256_set1_epi8(0x0F), bits45 = _mm256_set1_epi8(0x30);
    const __m256i k32 = _mm256_set1_epi8(32);
    for (int64_t r = r0; r < r1; r++) {
        const uint8_t *b = w + r * row_bytes;
        __m256d F = _mm256_setzero_pd();
        float special = 0.0f;
        for (int64_t i = 0; i < blocks; i++, b += 210) {
            const uint8_t *fx = xq + i * FIX_BYTES;
            PREFETCH(b, 210);
            float d;
            if (LV(q6_k_special)(b, x + i * QK_K, &d, &special)) continue;
            const int16_t *d0 = (const int16_t *)fx, *d1 = (const int16_t *)(fx + FIX_D1);
            const __m256d low = _mm256_set1_pd((double)d * fix_scale(fx));
            const __m256d high = _mm256_set1_pd((double)d * fix_scale(fx) * 32768.0);
            for (int h = 0; h < 2; h++) {
                const __m256i lo0 = _mm256_loadu_si256((const __m256i *)(b + 64 * h));
                const __m256i lo1 = _mm256_loadu_si256((const __m256i *)(b + 64 * h + 32));
                const __m256i hb = _mm256_loadu_si256((const __m256i *)(b + 128 + 32 * h));
#define SIX(l, hbits) _mm256_sub_epi8(_mm256_or_si256(_mm256_and_si256(l, low4),             \
                                                      _mm256_and_si256(hbits, bits45)), k32)
                const __m256i q[4] = {SIX(lo0, _mm256_slli_epi16(hb, 4)),
                                      SIX(lo1, _mm256_slli_epi16(hb, 2)),
                                      SIX(_mm256_srli_epi16(lo0, 4), hb),
                                      SIX(_mm256_srli_epi16(lo1, 4), _mm256_srli_epi16(hb, 2))};
#undef SIX
                __m256i A0 = _mm256_setzero_si256(), A1 = A0;
                for (int j = 0; j < 4; j++)
                    for (int g = 0; g < 2; g++) {  /* values 128h + 32j + 16g..: one group */
                        const __m128i bytes = g ? _mm256_extracti128_si256(q[j], 1)
                                                : _mm256_castsi256_si128(q[j]);
                        const __m256i wv = _mm256_mullo_epi16(
                            _mm256_cvtepi8_epi16(bytes),
                            _mm256_set1_epi16((int16_t)(int8_t)b[192 + 8 * h + 2 * j + g]));
                        const int64_t k = 128 * h + 32 * j + 16 * g;
                        const __m256i x0 = _mm256_loadu_si256((const __m256i *)(d0 + k));
                        const __m256i x1 = _mm256_loadu_si256((const __m256i *)(d1 + k));
                        A0 = _mm256_add_epi32(A0, _mm256_madd_epi16(wv, x0));
                        A1 = _mm256_add_epi32(A1, _mm256_madd_epi16(wv, x1));
                    }
                F = _mm256_fmadd_pd(_mm256_cvtepi32_pd(_mm256_castsi256_si128(A0)), low, F);
                F = _mm256_fmadd_pd(_mm256_cvtepi32_pd(_mm256_extracti128_si256(A0, 1)), low, F);
                F = _mm256_fmadd_pd(_mm256_cvtepi32_pd(_mm256_castsi256_si128(A1)), high, F);
                F = _mm256_fmadd_pd(_mm256_cvtepi32_pd(_mm256_extracti128_si256(A1, 1)), high, F);
            }
        }
        double lanes[4];
        _mm256_storeu_pd(lanes, F);
        y[r] = (float)((lanes[0] + lanes[2]) + (lanes[1] + lanes[3])) + special;
    }
}

#else
/* Q4_K in portable C: each block's Σ sc·q·K exact in int64, times d·s in float64. */
static void LV(fixed_q4_k)(const uint8_t *w, int64_t cols, const float *x, const uint8_t *xq,
                           float *y, int64_t r0, int64_t r1) {
    const int64_t blocks = cols / QK_K, row_bytes = blocks * 144;
    for (int64_t r = r0; r < r1; r++) {
        const uint8_t *b = w + r * row_bytes;
        double sum = 0.0, mins = 0.0;
        float special = 0.0f;
        for (int64_t i = 0; i < blocks; i++, b += 144) {
            const uint8_t *fx = xq + i * FIX_BYTES;
            float d, dmin;
            if (LV(q4_k_special)(b, x + i * QK_K, &d, &dmin, &special)) continue;
            uint64_t sc, m;
            scale_min_k_words(b + 4, &sc, &m);
            const int16_t *d0 = (const int16_t *)fx, *d1 = (const int16_t *)(fx + FIX_D1);
            int64_t q = 0;
            for (int c = 0; c < 4; c++)
                for (int l = 0; l < 32; l++) {
                    const int64_t k = 64 * c + l, byte = b[16 + 32 * c + l];
                    q += SCALE(2 * c) * (byte & 0xF) * (d0[k] + 32768 * (int64_t)d1[k]);
                    q += SCALE(2 * c + 1) * (byte >> 4) * (d0[k + 32] + 32768 * (int64_t)d1[k + 32]);
                }
            sum += (double)d * fix_scale(fx) * (double)q;
            mins += (double)dmin * fix_scale(fx) * fixed_mins(fx, m);
        }
        y[r] = (float)(sum - mins) + special;
    }
}

/* Q6_K in portable C: each block's Σ sc·(q − 32)·K exact in int64, times d·s in float64. */
static void LV(fixed_q6_k)(const uint8_t *w, int64_t cols, const float *x, const uint8_t *xq,
                           float *y, int64_t r0, int64_t r1) {
    const int64_t blocks = cols / QK_K, row_bytes = blocks * 210;
    for (int64_t r = r0; r < r1; r++) {
        const uint8_t *b = w + r * row_bytes;
        double sum = 0.0;
        float special = 0.0f;
        for (int64_t i = 0; i < blocks; i++, b += 210) {
            const uint8_t *fx = xq + i * FIX_BYTES;
            float d;
            if (LV(q6_k_special)(b, x + i * QK_K, &d, &special)) continue;
            const int16_t *d0 = (const int16_t *)fx, *d1 = (const int16_t *)(fx + FIX_D1);
            int64_t q = 0;
            for (int h = 0; h < 2; h++)
                for (int l = 0; l < 32; l++) {
                    const uint8_t lo0 = b[64 * h + l], lo1 = b[64 * h + 32 + l];
                    const uint8_t hb = b[128 + 32 * h + l];
                    const int six[4] = {(lo0 & 0xF) | ((hb & 3) << 4),
                                        (lo1 & 0xF) | (((hb >> 2) & 3) << 4),
                                        (lo0 >> 4) | (((hb >> 4) & 3) << 4),
                                        (lo1 >> 4) | ((hb >> 6) << 4)};
                    for (int j = 0; j < 4; j++) {
                        const int64_t k = 128 * h + 32 * j + l;
                        q += (int8_t)b[192 + k / 16] * (six[j] - 32) *
                             (d0[k] + 32768 * (int64_t)d1[k]);
                    }
                }
            sum += (double)d * fix_scale(fx) * (double)q;
        }
        y[r] = (float)sum + special;
    }
}
#endif

/* The fixed-point kernel of the type (KIND's index), or NULL: the float32 kernels take it. */
static fixed_fn LV(fixed_kernel)(int index) {
#if defined(FIXED_VNNI)
    if (index == 8) return vnni ? LV(fixed_q4_k_vnni) : LV(fixed_q4_k);
    if (index == 10) return vnni ? LV(fixed_q6_k_vnni) : LV(fixed_q6_k);
#else
    if (index == 8) return LV(fixed_q4_k);
    if (index == 10) return LV(fixed_q6_k);
#endif
    return NULL;
}
#undef FIXED_VNNI
#undef SCALE
