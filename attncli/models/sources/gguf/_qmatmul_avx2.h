/* One-token kernels on AVX2 + FMA (included by _qmatmul_body.h at that level and at AVX-512):
 * Q5_K, F16 and BF16 rows times x with each weight made in registers, the same float32 weight as the
 * dequantizer's (_dequant.c, the gguf package's) and the same lanes and order of sums as the
 * chunk path (dequantize a chunk, then dot64), so the same bits as it gives.
 */

/* Q5_K: value 64c + l (l < 32, group 2c) is lane l and 64c + 32 + l (group 2c + 1) lane 32 + l,
 * as dot64 adds a block's chunk. Each group's 32 five-bit values q are put together a byte
 * each, and each byte becomes the subnormal half 0x00qq = q·2⁻²⁴ (unpacked beside a zero
 * byte), converted exactly by F16C. dl·q is exact in float32 (11 + 6 + 5 bits), so the fused
 * (dl·2²⁴)·(q·2⁻²⁴) − ml, rounded once, is the dequantizer's fl(fl(dl·q) − ml) (dl·2²⁴ is
 * exact and finite where dl is: at most 65,504·63·2²⁴; inf·0 is NaN as there). */
static void LV(matvec_q5_k)(const uint8_t *w, int64_t cols, const float *x, float *y,
                            int64_t r0, int64_t r1) {
    const int64_t blocks = cols / QK_K, row_bytes = blocks * 176;
    const __m256i low4 = _mm256_set1_epi8(0x0F), bit4 = _mm256_set1_epi8(0x10);
    const __m256i zero = _mm256_setzero_si256();
    for (int64_t r = r0; r < r1; r++) {
        __m256 a[8];
        for (int m = 0; m < 8; m++) a[m] = _mm256_setzero_ps();
        const uint8_t *b = w + r * row_bytes;
        const float *xb = x;
        for (int64_t i = 0; i < blocks; i++, b += 176, xb += QK_K) {
            PREFETCH(b, 176);
            float dl[8] __attribute__((aligned(32))), ml[8] __attribute__((aligned(32)));
            __m256 dl8, ml8;
            LV(k_scales)(b, LV(half)(b), LV(half)(b + 2), &dl8, &ml8);
            _mm256_store_ps(dl, _mm256_mul_ps(dl8, _mm256_set1_ps(0x1p24f)));
            _mm256_store_ps(ml, ml8);
            const __m256i qh = _mm256_loadu_si256((const __m256i *)(b + 16));
#pragma GCC unroll 8
            for (int g = 0; g < 8; g++) { /* group g: nibble g & 1 of qs[32(g / 2) + l], bit g of qh[l] */
                const __m256i qs = _mm256_loadu_si256((const __m256i *)(b + 48 + 32 * (g / 2)));
                /* bit g of each qh byte to bit 4 (16-bit shifts, then masked: no bit crosses) */
                const __m256i top = g < 4 ? _mm256_slli_epi16(qh, 4 - g) : g == 4 ? qh
                                          : _mm256_srli_epi16(qh, g - 4);
                const __m256i q = _mm256_or_si256(
                    _mm256_and_si256(g & 1 ? _mm256_srli_epi16(qs, 4) : qs, low4),
                    _mm256_and_si256(top, bit4));
                const __m256i vlo = _mm256_unpacklo_epi8(q, zero), vhi = _mm256_unpackhi_epi8(q, zero);
                /* l = 0..7, 8..15, 16..23, 24..31 */
                const __m256 f[4] = {_mm256_cvtph_ps(_mm256_castsi256_si128(vlo)),
                                     _mm256_cvtph_ps(_mm256_castsi256_si128(vhi)),
                                     _mm256_cvtph_ps(_mm256_extracti128_si256(vlo, 1)),
                                     _mm256_cvtph_ps(_mm256_extracti128_si256(vhi, 1))};
                const __m256 s = _mm256_broadcast_ss(dl + g), t = _mm256_broadcast_ss(ml + g);
                const float *xg = xb + 32 * g;
                for (int m = 0; m < 4; m++) {
                    const int lane = 4 * (g & 1) + m;
                    a[lane] = _mm256_fmadd_ps(_mm256_fmsub_ps(s, f[m], t),
                                              _mm256_loadu_ps(xg + 8 * m), a[lane]);
                }
            }
        }
        y[r] = LV(tree8x8)(a);
    }
}

/* dot64's tail (values past the last 64 of a row): lane k & 63, a product and a sum. */
static ALWAYS_INLINE float LV(tail_tree)(__m256 *a, const float *wt, const float *x,
                                          int64_t k, int64_t cols) {
    if (k < cols) {
        float acc[64] __attribute__((aligned(32)));
        for (int m = 0; m < 8; m++) _mm256_store_ps(acc + 8 * m, a[m]);
        for (; k < cols; k++) {
            const float p = wt[k & 63] * x[k];
            acc[k & 63] = acc[k & 63] + p;
        }
        for (int m = 0; m < 8; m++) a[m] = _mm256_load_ps(acc + 8 * m);
    }
    return LV(tree8x8)(a);
}

/* The 16-bit types: value k is lane k mod 64, as dot64 adds the chunks. LOAD makes the 8 values
 * at a pointer float32, ONE the one value there (a row's tail past its last 64). */
#define MATVEC_16BIT(NAME, LOAD, ONE)                                                        \
    static void LV(NAME)(const uint8_t *w, int64_t cols, const float *x, float *y,         \
                         int64_t r0, int64_t r1) {                                          \
        const int64_t whole = cols & ~(int64_t)63;                                          \
        for (int64_t r = r0; r < r1; r++) {                                                 \
            __m256 a[8];                                                                    \
            for (int m = 0; m < 8; m++) a[m] = _mm256_setzero_ps();                         \
            const uint8_t *row = w + r * cols * 2;                                          \
            int64_t k = 0;                                                                  \
            for (; k < whole; k += 64)                                                      \
                for (int m = 0; m < 8; m++)                                                 \
                    a[m] = _mm256_fmadd_ps(LOAD(row + 2 * (k + 8 * m)),                     \
                                           _mm256_loadu_ps(x + k + 8 * m), a[m]);           \
            float tail[64];                                                                 \
            for (int64_t j = k; j < cols; j++) tail[j & 63] = ONE(row + 2 * j);             \
            y[r] = LV(tail_tree)(a, tail, x, k, cols);                                      \
        }                                                                                   \
    }

/* F16: halves converted by F16C. */
static ALWAYS_INLINE __m256 LV(f16x8)(const uint8_t *p) {
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
}
MATVEC_16BIT(matvec_f16, LV(f16x8), LV(half))

/* BF16: a bfloat16 is the top half of its float32 (a 16-bit shift). */
static ALWAYS_INLINE __m256 LV(bf16x8)(const uint8_t *p) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(
        _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p)), 16));
}
static ALWAYS_INLINE float LV(bf16)(const uint8_t *p) {
    return from_bits(((uint32_t)p[0] << 16) | ((uint32_t)p[1] << 24));
}
MATVEC_16BIT(matvec_bf16, LV(bf16x8), LV(bf16))
#undef MATVEC_16BIT
