/* _qmatmul_fixed.h's kernels in AVX-512, included twice: FIXED_DOT as vpmaddwd and an add,
 * and as VNNI's vpdpwssd (the same exact int32 lanes). Q4_K: a group's 32 nibbles widen to 32
 * int16, times the group's scale (<= 945 each); per block each accumulator's lane adds 4
 * pairs, and A0 + B0 (digit D0; A1 + B1, D1) 8, |lane| <= 8·2·945·32767 < 2^29, so the two
 * halves' sum stays below 2^30. */
/* A row's float64 lanes added in a fixed tree, rounded once, and its special blocks' sum. */
static ALWAYS_INLINE float FIX(row_result)(__m512d F, float special) {
    double lanes[8];
    _mm512_storeu_pd(lanes, F);
    const double sum = ((lanes[0] + lanes[4]) + (lanes[2] + lanes[6])) +
                       ((lanes[1] + lanes[5]) + (lanes[3] + lanes[7]));
    return (float)sum + special;
}

/* One Q4_K row's product (b: its first block): block after block into float64 lanes F (the
 * mins' sum taken off them, lane g a block's group g), a block with an inf or NaN scale apart; the weights PREFETCH_AHEAD bytes on asked for
 * (_qmatmul.c). The six-bit scales and mins unpacked four bytes a word (scale_min_k's bits),
 * each group's scale spread over its 32 int16 lanes by a permute, the mins made float64. */
static ALWAYS_INLINE float FIX(q4_k_row)(const uint8_t *b, const uint8_t *xq, const float *x,
                                         int64_t blocks) {
    __m512d F = _mm512_setzero_pd();
    float special = 0.0f;
    const __m512i low4 = _mm512_set1_epi16(0xF);
    __m512i spread[8];  /* group g's scale in every int16 lane */
    for (int g = 0; g < 8; g++) spread[g] = _mm512_set1_epi16((int16_t)g);
    for (int64_t i = 0; i < blocks; i++, b += 144) {
        const uint8_t *fx = xq + i * FIX_BYTES;
        PREFETCH(b, 144);
        float d, dmin;
        if (LV(q4_k_special)(b, x + i * QK_K, &d, &dmin, &special)) continue;
        uint64_t sc, m;
        scale_min_k_words(b + 4, &sc, &m);
        const __m512i scales = _mm512_castsi128_si512(
            _mm_cvtepu8_epi16(_mm_cvtsi64_si128((int64_t)sc)));  /* 8 int16 */
        const int16_t *d0 = (const int16_t *)fx, *d1 = (const int16_t *)(fx + FIX_D1);
        /* four accumulators (low and high nibbles, each digit): chains of 4 a block */
        __m512i A0 = _mm512_setzero_si512(), A1 = A0, B0 = A0, B1 = A0;
        for (int c = 0; c < 4; c++) {
            const __m512i v = _mm512_cvtepu8_epi16(
                _mm256_loadu_si256((const __m256i *)(b + 16 + 32 * c)));
            const __m512i lo = _mm512_mullo_epi16(
                _mm512_and_si512(v, low4), _mm512_permutexvar_epi16(spread[2 * c], scales));
            const __m512i hi = _mm512_mullo_epi16(
                _mm512_srli_epi16(v, 4), _mm512_permutexvar_epi16(spread[2 * c + 1], scales));
            A0 = FIXED_DOT(A0, lo, _mm512_loadu_si512(d0 + 64 * c));
            A1 = FIXED_DOT(A1, lo, _mm512_loadu_si512(d1 + 64 * c));
            B0 = FIXED_DOT(B0, hi, _mm512_loadu_si512(d0 + 64 * c + 32));
            B1 = FIXED_DOT(B1, hi, _mm512_loadu_si512(d1 + 64 * c + 32));
        }
        A0 = _mm512_add_epi32(A0, B0), A1 = _mm512_add_epi32(A1, B1);
        const double s = fix_scale(fx), ds = (double)d * s;
        const __m256i h0 = _mm256_add_epi32(_mm512_castsi512_si256(A0),
                                            _mm512_extracti64x4_epi64(A0, 1));
        const __m256i h1 = _mm256_add_epi32(_mm512_castsi512_si256(A1),
                                            _mm512_extracti64x4_epi64(A1, 1));
        F = _mm512_fmadd_pd(_mm512_cvtepi32_pd(h0), _mm512_set1_pd(ds), F);
        F = _mm512_fmadd_pd(_mm512_cvtepi32_pd(h1), _mm512_set1_pd(ds * 32768.0), F);
        /* lane g: m_g·ΣK_g, exact, times −dmin·s */
        const __m512d mins = _mm512_mul_pd(
            _mm512_cvtepi64_pd(_mm512_cvtepu8_epi64(_mm_cvtsi64_si128((int64_t)m))),
            _mm512_loadu_pd((const double *)(fx + FIX_SUMS)));
        F = _mm512_fmadd_pd(mins, _mm512_set1_pd(-(double)dmin * s), F);
    }
    return FIX(row_result)(F, special);
}

/* One Q6_K row's product: each half's 128 six-bit values put together a byte each
 * (64 at a time), less 32, widened to int16 a quarter at a time and times their groups' scales
 * (|sc·(q − 32)| <= 128·32); per block a lane of A0 adds 8 pairs, |lane| <= 8·2·4096·32767 <
 * 2^31, so each half of the lanes goes to float64 apart. */
static ALWAYS_INLINE float FIX(q6_k_row)(const uint8_t *b, const uint8_t *xq, const float *x,
                                         int64_t blocks) {
    __m512d F = _mm512_setzero_pd();
    float special = 0.0f;
    __m512i pick[8];  /* quarter 4h + j's int16 lanes: scale 8h + 2j (0..15), + 1 (16..31) */
    for (int hj = 0; hj < 8; hj++)
        pick[hj] = _mm512_inserti64x4(_mm512_set1_epi16((int16_t)(2 * hj)),
                                      _mm256_set1_epi16((int16_t)(2 * hj + 1)), 1);
    const __m512i low4 = _mm512_set1_epi8(0x0F), bits45 = _mm512_set1_epi8(0x30);
    const __m512i k32 = _mm512_set1_epi8(32);
    for (int64_t i = 0; i < blocks; i++, b += 210) {
        const uint8_t *fx = xq + i * FIX_BYTES;
        PREFETCH(b, 210);
        float d;
        if (LV(q6_k_special)(b, x + i * QK_K, &d, &special)) continue;
        const __m512i sc = _mm512_cvtepi8_epi16(
            _mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)(b + 192))));
        const int16_t *d0 = (const int16_t *)fx, *d1 = (const int16_t *)(fx + FIX_D1);
        __m512i A0 = _mm512_setzero_si512(), A1 = A0;
        for (int h = 0; h < 2; h++) {
            /* bytes 0..31: quarter 0 (low nibbles of ql[64h..], qh bits 0-1) or 2 (high
             * nibbles, bits 4-5); bytes 32..63: quarter 1 (ql[64h + 32..], bits 2-3) or 3 */
            const __m512i lo = _mm512_loadu_si512(b + 64 * h);
            const __m256i hb = _mm256_loadu_si256((const __m256i *)(b + 128 + 32 * h));
            const __m512i hi = _mm512_inserti64x4(_mm512_castsi256_si512(hb),
                                                  _mm256_srli_epi16(hb, 2), 1);
            /* 0xEA: (a & b) | c, bit by bit */
            const __m512i q01 = _mm512_sub_epi8(_mm512_ternarylogic_epi32(
                lo, low4, _mm512_and_si512(_mm512_slli_epi16(hi, 4), bits45), 0xEA), k32);
            const __m512i q23 = _mm512_sub_epi8(_mm512_ternarylogic_epi32(
                _mm512_srli_epi16(lo, 4), low4, _mm512_and_si512(hi, bits45), 0xEA), k32);
            for (int j = 0; j < 4; j++) {  /* values 128h + 32j..: groups 8h + 2j and + 1 */
                const __m512i q = j < 2 ? q01 : q23;
                const __m512i v = _mm512_cvtepi8_epi16(j & 1 ? _mm512_extracti64x4_epi64(q, 1)
                                                             : _mm512_castsi512_si256(q));
                const __m512i wv = _mm512_mullo_epi16(
                    v, _mm512_permutexvar_epi16(pick[4 * h + j], sc));
                const int64_t k = 128 * h + 32 * j;
                A0 = FIXED_DOT(A0, wv, _mm512_loadu_si512(d0 + k));
                A1 = FIXED_DOT(A1, wv, _mm512_loadu_si512(d1 + k));
            }
        }
        const __m512d low = _mm512_set1_pd((double)d * fix_scale(fx));
        const __m512d high = _mm512_set1_pd((double)d * fix_scale(fx) * 32768.0);
        F = _mm512_fmadd_pd(_mm512_cvtepi32_pd(_mm512_castsi512_si256(A0)), low, F);
        F = _mm512_fmadd_pd(_mm512_cvtepi32_pd(_mm512_extracti64x4_epi64(A0, 1)), low, F);
        F = _mm512_fmadd_pd(_mm512_cvtepi32_pd(_mm512_castsi512_si256(A1)), high, F);
        F = _mm512_fmadd_pd(_mm512_cvtepi32_pd(_mm512_extracti64x4_epi64(A1, 1)), high, F);
    }
    return FIX(row_result)(F, special);
}

/* Rows r0..r1 of a type (ROW: its one row's kernel, BYTES a block). */
#define FIXED_ROWS(NAME, ROW, BYTES)                                                          \
    static void FIX(NAME)(const uint8_t *w, int64_t cols, const float *x, const uint8_t *xq, \
                          float *y, int64_t r0, int64_t r1) {                                \
        const int64_t blocks = cols / QK_K;                                                   \
        for (int64_t r = r0; r < r1; r++)                                                     \
            y[r] = FIX(ROW)(w + r * blocks * (BYTES), xq, x, blocks);                         \
    }
FIXED_ROWS(fixed_q4_k, q4_k_row, 144)
FIXED_ROWS(fixed_q6_k, q6_k_row, 210)
#undef FIXED_ROWS
