/* llama.cpp's numerics (--numerics llama.cpp), included once per vector level as
 * _qmatmul_body.h is: the activations quantized to 8 bits the way ggml's reference quantizers
 * do (Q8_0 for Q4_0, Q5_0 and Q8_0 weights; Q8_1 for Q4_1 and Q5_1; Q8_K for the K-types), and
 * each block's dot product taken on the integers, as ggml-cpu's vec_dot_*_q8_* functions do:
 *   per block an exact int32 sum Σ q_w·q_x (times each group's 6- or 8-bit scale, and the
 *   Q8_K block's per-16 sums times each group's min), then in float32, block after block:
 *   sum += (d_w·d_x)·isum (− (dmin_w·d_x)·imin for Q4_K and Q5_K; + m_w·s_x for Q4_1, Q5_1).
 * The integers are exact whatever the compiler vectorises; the float32 sums run in one order
 * (ggml's SIMD versions add the same terms in other orders: differences of a few roundings).
 */

/* Q8_0 (f16 d, 32 int8) and Q8_1 (f16 d, f16 s = d·Σq, 32 int8): quantize_row_q8_{0,1}_ref.
 * A NaN in a block makes its d NaN, as the gguf package's np.max makes it (fmaxf alone would
 * skip it): every product with the block is then NaN, as float32's is, not a finite number
 * made without it (a hostile file's NaN scale would give an answer the float32 run refuses). */
static void LV(quantize_q8_0)(const float *x, uint8_t *y, int64_t blocks, int with_sum) {
    const int size = with_sum ? 36 : 34;
    for (int64_t b = 0; b < blocks; b++, x += 32, y += size) {
        float amax = 0.0f;
        int nan = 0;
        for (int l = 0; l < 32; l++) amax = fmaxf(amax, fabsf(x[l])), nan |= x[l] != x[l];
        const float d = nan ? NAN : amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
        int8_t *q = (int8_t *)(y + (with_sum ? 4 : 2));
        int sum = 0;
        for (int l = 0; l < 32; l++) {
            q[l] = round_int8(x[l] * id);
            sum += q[l];
        }
        put_f16(y, d);
        if (with_sum) put_f16(y + 2, (float)sum * d);
    }
}

/* Q8_K (float d, 256 int8, 16 int16 sums of 16): quantize_row_q8_K_ref; a NaN in a block
 * makes its d NaN, as in quantize_q8_0. */
static void LV(quantize_q8_k)(const float *x, uint8_t *y, int64_t blocks) {
    for (int64_t b = 0; b < blocks; b++, x += QK_K, y += Q8K_BYTES) {
        float max = 0.0f, amax = 0.0f;
        int nan = 0;
        for (int l = 0; l < QK_K; l++) {
            if (fabsf(x[l]) > amax) amax = fabsf(x[l]), max = x[l];
            nan |= x[l] != x[l];
        }
        int8_t *q = (int8_t *)(y + 4);
        int16_t sums[16];
        float d = 0.0f;
        if (amax == 0.0f) {
            memset(q, 0, QK_K);
        } else {
            const float iscale = -127.0f / max;
            for (int l = 0; l < QK_K; l++) {
                int v = nearest_int(iscale * x[l]);
                q[l] = (int8_t)(v > 127 ? 127 : v < -128 ? -128 : v);
            }
            d = 1.0f / iscale;
        }
        if (nan) d = NAN;
        for (int j = 0; j < 16; j++) {
            int s = 0;
            for (int l = 0; l < 16; l++) s += q[16 * j + l];
            sums[j] = (int16_t)s;
        }
        memcpy(y, &d, 4);
        memcpy(y + 4 + QK_K, sums, sizeof sums);
    }
}

/* Σ a[l]·b[l] over n int8 pairs (n a multiple of 16): exact. */
static ALWAYS_INLINE int32_t LV(idot)(const int8_t *a, const int8_t *b, int n) {
    int32_t s = 0;
    for (int l = 0; l < n; l++) s += (int32_t)a[l] * (int32_t)b[l];
    return s;
}

#if defined(__AVX2__)
/* The 8 int32 lanes' sum (exact: the products' sums fit int32). */
static ALWAYS_INLINE int32_t LV(hsum_i32)(__m256i v) {
    __m128i h = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    h = _mm_add_epi32(h, _mm_unpackhi_epi64(h, h));
    h = _mm_add_epi32(h, _mm_shuffle_epi32(h, 1));
    return _mm_cvtsi128_si32(h);
}
#endif

/* Σ w·x over one block's 32 int8 pairs (Q8_0), and Σ (q − 8·minus8)·x over 32 nibbles (16
 * bytes: low nibbles values 0..15, high 16..31; Q4_0 and Q4_1) against 32 int8: exact int32,
 * whatever the level. Where there is AVX2, four blocks' sums are taken at once, their lanes
 * added by three vphaddd (each sum exact; the float32 steps after, block by block, unchanged). */
#ifndef SUM_KINDS
#define SUM_KINDS
enum { SUM_I8 = 0, SUM_Q4 = 1, SUM_Q4_MINUS8 = 2 };
#endif

#if defined(__AVX2__)
static ALWAYS_INLINE __m256i LV(isum_lanes)(int kind, const uint8_t *w, const uint8_t *x) {
    const __m256i y = _mm256_loadu_si256((const __m256i *)x);
    if (kind == SUM_I8) {  /* widened to int16 and vpmaddwd: exact for every byte, −128 too */
        const __m256i a = _mm256_loadu_si256((const __m256i *)w);
        return _mm256_add_epi32(
            _mm256_madd_epi16(_mm256_cvtepi8_epi16(_mm256_castsi256_si128(a)),
                              _mm256_cvtepi8_epi16(_mm256_castsi256_si128(y))),
            _mm256_madd_epi16(_mm256_cvtepi8_epi16(_mm256_extracti128_si256(a, 1)),
                              _mm256_cvtepi8_epi16(_mm256_extracti128_si256(y, 1))));
    }
    /* 32 nibbles by 32 int8 a vpmaddubsw (|pair| <= 2·15·128), pairs added by a vpmaddwd;
     * Σ(q − 8)·x as Σq·x − 8·Σx, Σx the same way with ones */
    const __m128i b = _mm_loadu_si128((const __m128i *)w), low4 = _mm_set1_epi8(0xF);
    const __m256i v = _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(b, 4), low4),
                                       _mm_and_si128(b, low4));
    const __m256i ones = _mm256_set1_epi16(1);
    const __m256i acc = _mm256_madd_epi16(_mm256_maddubs_epi16(v, y), ones);
    if (kind == SUM_Q4) return acc;
    return _mm256_sub_epi32(acc, _mm256_slli_epi32(_mm256_madd_epi16(
                                     _mm256_maddubs_epi16(_mm256_set1_epi8(1), y), ones), 3));
}

/* Four blocks' sums (w, x: the first block's values; wb, xb: bytes a block) into is. */
static ALWAYS_INLINE void LV(isums4)(int kind, const uint8_t *w, const uint8_t *x, int wb, int xb,
                                     int32_t *is) {
    const __m256i ab = _mm256_hadd_epi32(LV(isum_lanes)(kind, w, x),
                                         LV(isum_lanes)(kind, w + wb, x + xb));
    const __m256i cd = _mm256_hadd_epi32(LV(isum_lanes)(kind, w + 2 * wb, x + 2 * xb),
                                         LV(isum_lanes)(kind, w + 3 * wb, x + 3 * xb));
    const __m256i abcd = _mm256_hadd_epi32(ab, cd);  /* each 128-bit half: 4 blocks' partials */
    _mm_storeu_si128((__m128i *)is, _mm_add_epi32(_mm256_castsi256_si128(abcd),
                                                  _mm256_extracti128_si256(abcd, 1)));
}
#define QUADS 1
#endif

static ALWAYS_INLINE int32_t LV(isum)(int kind, const uint8_t *w, const uint8_t *x) {
#if defined(__AVX2__)
    return LV(hsum_i32)(LV(isum_lanes)(kind, w, x));
#else
    if (kind == SUM_I8) return LV(idot)((const int8_t *)w, (const int8_t *)x, 32);
    const int offset = kind == SUM_Q4_MINUS8 ? 8 : 0;
    int8_t v[32];
    for (int l = 0; l < 16; l++) {
        v[l] = (int8_t)((w[l] & 0xF) - offset);
        v[l + 16] = (int8_t)((w[l] >> 4) - offset);
    }
    return LV(idot)(v, (const int8_t *)x, 32);
#endif
}

/* One row of blocks of each type against one token's Q8 blocks (n weight blocks). */
static float LV(dot_q8_0)(const uint8_t *w, const uint8_t *x, int64_t n) {
    float sum = 0.0f;
    int64_t b = 0;
#if defined(QUADS)
    for (; b + 4 <= n; b += 4, w += 4 * 34, x += 4 * 34) {
        int32_t is[4];
        LV(isums4)(SUM_I8, w + 2, x + 2, 34, 34, is);
        for (int k = 0; k < 4; k++)
            sum += (float)is[k] * (LV(half)(w + 34 * k) * LV(half)(x + 34 * k));
    }
#endif
    for (; b < n; b++, w += 34, x += 34)
        sum += (float)LV(isum)(SUM_I8, w + 2, x + 2) * (LV(half)(w) * LV(half)(x));
    return sum;
}

static float LV(dot_q4_0)(const uint8_t *w, const uint8_t *x, int64_t n) {
    float sum = 0.0f;
    int64_t b = 0;
#if defined(QUADS)
    for (; b + 4 <= n; b += 4, w += 4 * 18, x += 4 * 34) {
        int32_t is[4];
        LV(isums4)(SUM_Q4_MINUS8, w + 2, x + 2, 18, 34, is);
        for (int k = 0; k < 4; k++)
            sum += (float)is[k] * LV(half)(w + 18 * k) * LV(half)(x + 34 * k);
    }
#endif
    for (; b < n; b++, w += 18, x += 34)
        sum += (float)LV(isum)(SUM_Q4_MINUS8, w + 2, x + 2) * LV(half)(w) * LV(half)(x);
    return sum;
}

static float LV(dot_q4_1)(const uint8_t *w, const uint8_t *x, int64_t n) {
    float sum = 0.0f;
    int64_t b = 0;
#if defined(QUADS)
    for (; b + 4 <= n; b += 4, w += 4 * 20, x += 4 * 36) {
        int32_t is[4];
        LV(isums4)(SUM_Q4, w + 4, x + 4, 20, 36, is);
        for (int k = 0; k < 4; k++) {
            const uint8_t *wk = w + 20 * k, *xk = x + 36 * k;
            sum += (LV(half)(wk) * LV(half)(xk)) * (float)is[k] +
                   LV(half)(wk + 2) * LV(half)(xk + 2);
        }
    }
#endif
    for (; b < n; b++, w += 20, x += 36) {
        float isum = (float)LV(isum)(SUM_Q4, w + 4, x + 4);
        sum += (LV(half)(w) * LV(half)(x)) * isum + LV(half)(w + 2) * LV(half)(x + 2);
    }
    return sum;
}
#undef QUADS

static ALWAYS_INLINE void LV(fives)(const uint8_t *qh4, const uint8_t *q, int8_t *v, int off) {
    uint32_t qh = u32(qh4);
    for (int l = 0; l < 16; l++) {
        v[l] = (int8_t)(((q[l] & 0xF) | (((qh >> l) & 1u) << 4)) - off);
        v[l + 16] = (int8_t)(((q[l] >> 4) | (((qh >> (l + 16)) & 1u) << 4)) - off);
    }
}

static float LV(dot_q5_0)(const uint8_t *w, const uint8_t *x, int64_t n) {
    float sum = 0.0f;
    int8_t v[32];
    for (int64_t b = 0; b < n; b++, w += 22, x += 34) {
        LV(fives)(w + 2, w + 6, v, 16);
        sum += (LV(half)(w) * LV(half)(x)) * (float)LV(idot)(v, (const int8_t *)(x + 2), 32);
    }
    return sum;
}

static float LV(dot_q5_1)(const uint8_t *w, const uint8_t *x, int64_t n) {
    float sum = 0.0f;
    int8_t v[32];
    for (int64_t b = 0; b < n; b++, w += 24, x += 36) {
        LV(fives)(w + 4, w + 8, v, 0);
        float isum = (float)LV(idot)(v, (const int8_t *)(x + 4), 32);
        sum += (LV(half)(w) * LV(half)(x)) * isum + LV(half)(w + 2) * LV(half)(x + 2);
    }
    return sum;
}

/* Q4_K and Q5_K's six-bit scales and mins as integers (scale_min_k's, before d and dmin). */
static ALWAYS_INLINE void LV(scales_k)(const uint8_t *sc, int32_t *s, int32_t *m) {
    for (int j = 0; j < 4; j++) {
        s[j] = sc[j] & 0x3F, m[j] = sc[4 + j] & 0x3F;
        s[4 + j] = (sc[8 + j] & 0xF) | ((sc[j] >> 2) & 0x30);
        m[4 + j] = (sc[8 + j] >> 4) | ((sc[4 + j] >> 2) & 0x30);
    }
}

/* Q4_K (fifth = NULL) or Q5_K (fifth: qh) against Q8_K: Σ_g s_g·Σ q·q8 and Σ_g m_g·Σ q8. */
static ALWAYS_INLINE float LV(dot_k45)(const uint8_t *w, const uint8_t *x, int64_t n, int five) {
    float sum = 0.0f;
    int8_t v[QK_K];
    const int bytes = five ? 176 : 144;
    for (int64_t b = 0; b < n; b++, w += bytes, x += Q8K_BYTES) {
        const uint8_t *qh = w + 16, *qs = w + (five ? 48 : 16);
        for (int c = 0; c < 4; c++)
            for (int l = 0; l < 32; l++) {
                int lo = qs[32 * c + l] & 0xF, hi = qs[32 * c + l] >> 4;
                if (five) lo |= ((qh[l] >> (2 * c)) & 1) << 4, hi |= ((qh[l] >> (2 * c + 1)) & 1) << 4;
                v[64 * c + l] = (int8_t)lo, v[64 * c + 32 + l] = (int8_t)hi;
            }
        int32_t s[8], m[8], isum = 0, imin = 0;
        LV(scales_k)(w + 4, s, m);
        const int8_t *q8 = (const int8_t *)(x + 4);
        int16_t sums[16];
        memcpy(sums, x + 4 + QK_K, sizeof sums);
        for (int g = 0; g < 8; g++) {
            isum += s[g] * LV(idot)(v + 32 * g, q8 + 32 * g, 32);
            imin += m[g] * (sums[2 * g] + sums[2 * g + 1]);
        }
        float dx;
        memcpy(&dx, x, 4);
        sum += (LV(half)(w) * dx) * (float)isum;
        sum -= (LV(half)(w + 2) * dx) * (float)imin;
    }
    return sum;
}

#if defined(__AVX2__)
/* The 8 int32 lanes of a and of b summed: (Σa, Σb), exact. */
static ALWAYS_INLINE void LV(hsum2_i32)(__m256i a, __m128i b, int32_t *sa, int32_t *sb) {
    __m128i h = _mm_add_epi32(_mm256_castsi256_si128(a), _mm256_extracti128_si256(a, 1));
    h = _mm_hadd_epi32(h, b);  /* a01 a23 b01 b23 */
    h = _mm_hadd_epi32(h, h);  /* Σa Σb Σa Σb */
    *sa = _mm_cvtsi128_si32(h), *sb = _mm_extract_epi32(h, 1);
}

/* Q4_K against Q8_K in AVX2, as ggml-cpu's AVX2 dot does it: 32 nibbles by 32 int8 a
 * vpmaddubsw (pairs of products, |sum| <= 2·15·128: no saturation), each group's scale by a
 * vpmaddwd, the scales and mins unpacked four bytes a word and widened in registers, and
 * Σ_g m_g·Σq8 as one vpmaddwd of the mins with the Q8_K block's sums of 16 added in pairs:
 * the same exact int32 isum and imin as dot_k45's, and the same float32 sums after. */
static float LV(dot_q4_k)(const uint8_t *w, const uint8_t *x, int64_t n) {
    float sum = 0.0f;
    const __m256i low4 = _mm256_set1_epi8(0xF);
    for (int64_t b = 0; b < n; b++, w += 144, x += Q8K_BYTES) {
        /* scale_min_k's eight six-bit scales and mins, four bytes a word */
        const uint32_t u0 = u32(w + 4), u1 = u32(w + 8), u2 = u32(w + 12);
        const uint64_t s = (u0 & 0x3F3F3F3Fu) |
                           (uint64_t)((u2 & 0x0F0F0F0Fu) | ((u0 >> 2) & 0x30303030u)) << 32;
        const uint64_t m = (u1 & 0x3F3F3F3Fu) |
                           (uint64_t)(((u2 >> 4) & 0x0F0F0F0Fu) | ((u1 >> 2) & 0x30303030u)) << 32;
        const __m128i s16 = _mm_cvtepu8_epi16(_mm_cvtsi64_si128((int64_t)s));  /* 8 × int16 */
        const __m256i scales = _mm256_broadcastsi128_si256(s16);
        const __m256i bsums = _mm256_loadu_si256((const __m256i *)(x + 4 + QK_K));
        const __m128i pairs = _mm_hadd_epi16(_mm256_castsi256_si128(bsums),
                                             _mm256_extracti128_si256(bsums, 1)); /* Σq8 of g */
        const __m128i mins = _mm_madd_epi16(_mm_cvtepu8_epi16(_mm_cvtsi64_si128((int64_t)m)),
                                            pairs);  /* |lane| <= 2·63·4096 */
        const int8_t *q8 = (const int8_t *)(x + 4);
        __m256i acc = _mm256_setzero_si256();
        for (int j = 0; j < 4; j++) {
            /* every int16 lane: scale 2j (lo), 2j + 1 (hi) */
            const __m256i slo = _mm256_shuffle_epi8(scales, _mm256_set1_epi16((int16_t)(0x0100 + 0x0404 * j)));
            const __m256i shi = _mm256_shuffle_epi8(scales, _mm256_set1_epi16((int16_t)(0x0302 + 0x0404 * j)));
            const __m256i v = _mm256_loadu_si256((const __m256i *)(w + 16 + 32 * j));
            const __m256i lo = _mm256_and_si256(v, low4);
            const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), low4);
            const __m256i plo = _mm256_maddubs_epi16(lo, _mm256_loadu_si256((const __m256i *)(q8 + 64 * j)));
            const __m256i phi = _mm256_maddubs_epi16(hi, _mm256_loadu_si256((const __m256i *)(q8 + 64 * j + 32)));
            acc = _mm256_add_epi32(acc, _mm256_add_epi32(_mm256_madd_epi16(plo, slo),
                                                         _mm256_madd_epi16(phi, shi)));
        }
        int32_t isum, imin;
        LV(hsum2_i32)(acc, mins, &isum, &imin);
        float dx;
        memcpy(&dx, x, 4);
        sum += (LV(half)(w) * dx) * (float)isum;
        sum -= (LV(half)(w + 2) * dx) * (float)imin;
    }
    return sum;
}
#else
static float LV(dot_q4_k)(const uint8_t *w, const uint8_t *x, int64_t n) {
    return LV(dot_k45)(w, x, n, 0);
}
#endif

static float LV(dot_q5_k)(const uint8_t *w, const uint8_t *x, int64_t n) {
    return LV(dot_k45)(w, x, n, 1);
}

#if defined(__AVX2__)
/* Q6_K against Q8_K in AVX2: each quarter's 32 six-bit values (0..63, before − 32) by 32 int8
 * a vpmaddubsw (|pair| <= 2·63·128), its two groups' scales by a vpmaddwd, and Σ(q6 − 32)·q8 as
 * Σq6·q8 − 32·Σq8 with the Q8_K block's sums of 16: the same exact int32 isum as the scalar
 * dot's, and the same float32 sum after. */
static float LV(dot_q6_k)(const uint8_t *w, const uint8_t *x, int64_t n) {
    float sum = 0.0f;
    const __m256i low4 = _mm256_set1_epi8(0x0F), three = _mm256_set1_epi8(3);
    for (int64_t b = 0; b < n; b++, w += 210, x += Q8K_BYTES) {
        const uint8_t *ql = w, *qh = w + 128;
        const int8_t *q8 = (const int8_t *)(x + 4);
        /* the 16 scales as int16, and Σ_g scale_g·Σq8 of g (one vpmaddwd, lanes exact) */
        const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(w + 192)));
        const __m256i offset = _mm256_madd_epi16(
            sc16, _mm256_loadu_si256((const __m256i *)(x + 4 + QK_K)));  /* |lane| <= 2^19 */
        __m256i acc = _mm256_setzero_si256();
        for (int h = 0; h < 2; h++) {
            /* scales 8h..8h+7 in both halves: lane pair j picks 8h + 2j (low), + 1 (high) */
            const __m256i half8 = h ? _mm256_permute2x128_si256(sc16, sc16, 0x11)
                                    : _mm256_permute2x128_si256(sc16, sc16, 0x00);
            const __m256i lo0 = _mm256_loadu_si256((const __m256i *)(ql + 64 * h));
            const __m256i lo1 = _mm256_loadu_si256((const __m256i *)(ql + 64 * h + 32));
            const __m256i hb = _mm256_loadu_si256((const __m256i *)(qh + 32 * h));
#define HIGH2(s) _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, s), three), 4)
            const __m256i q[4] = {
                _mm256_or_si256(_mm256_and_si256(lo0, low4), HIGH2(0)),
                _mm256_or_si256(_mm256_and_si256(lo1, low4), HIGH2(2)),
                _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(lo0, 4), low4), HIGH2(4)),
                _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(lo1, 4), low4), HIGH2(6))};
#undef HIGH2
            for (int j = 0; j < 4; j++) {  /* values 128h + 32j + l: groups 8h + 2j and + 1 */
                const __m256i pick = _mm256_setr_m128i(_mm_set1_epi16((int16_t)(0x0100 + 0x0404 * j)),
                                                       _mm_set1_epi16((int16_t)(0x0302 + 0x0404 * j)));
                const __m256i scales = _mm256_shuffle_epi8(half8, pick);
                const __m256i p = _mm256_maddubs_epi16(
                    q[j], _mm256_loadu_si256((const __m256i *)(q8 + 128 * h + 32 * j)));
                acc = _mm256_add_epi32(acc, _mm256_madd_epi16(p, scales));
            }
        }
        /* Σ(q6 − 32)·q8·scale = Σq6·q8·scale − 32·Σ_g scale_g·Σq8: every lane exact */
        const int32_t isum = LV(hsum_i32)(_mm256_sub_epi32(acc, _mm256_slli_epi32(offset, 5)));
        float dx;
        memcpy(&dx, x, 4);
        sum += (LV(half)(w + 208) * dx) * (float)isum;
    }
    return sum;
}

#else
/* Q6_K against Q8_K: Σ_g scale_g·Σ (q6 − 32)·q8 over 16 groups of 16. */
static float LV(dot_q6_k)(const uint8_t *w, const uint8_t *x, int64_t n) {
    float sum = 0.0f;
    int8_t v[QK_K];
    for (int64_t b = 0; b < n; b++, w += 210, x += Q8K_BYTES) {
        const uint8_t *ql = w, *qh = w + 128;
        for (int h = 0; h < 2; h++)
            for (int l = 0; l < 32; l++) {
                const uint8_t lo0 = ql[64 * h + l], lo1 = ql[64 * h + 32 + l], hb = qh[32 * h + l];
                int8_t *o = v + 128 * h;
                o[l] = (int8_t)(((lo0 & 0xF) | ((hb & 3) << 4)) - 32);
                o[32 + l] = (int8_t)(((lo1 & 0xF) | (((hb >> 2) & 3) << 4)) - 32);
                o[64 + l] = (int8_t)(((lo0 >> 4) | (((hb >> 4) & 3) << 4)) - 32);
                o[96 + l] = (int8_t)(((lo1 >> 4) | ((hb >> 6) << 4)) - 32);
            }
        const int8_t *q8 = (const int8_t *)(x + 4);
        int32_t isum = 0;
        for (int g = 0; g < 16; g++)
            isum += (int32_t)(int8_t)w[192 + g] * LV(idot)(v + 16 * g, q8 + 16 * g, 16);
        float dx;
        memcpy(&dx, x, 4);
        sum += (LV(half)(w + 208) * dx) * (float)isum;
    }
    return sum;
}

#endif

/* By the kernels' index (KIND): the dot, and the activation type (A_FLOAT: none, the float
 * kernels take float activations rounded as ggml rounds them, in qmatmul.py). */
static const dot_fn LV(DOT)[KINDS] = {
    NULL, NULL, NULL, LV(dot_q8_0), LV(dot_q4_0), LV(dot_q4_1), LV(dot_q5_0), LV(dot_q5_1),
    LV(dot_q4_k), LV(dot_q5_k), LV(dot_q6_k),
};

/* Rows r0..r1 of W against each token's quantized activations (xq: tokens rows of xq_bytes). */
static void LV(matmul_q8)(const kind *t, const uint8_t *w, int64_t rows, int64_t cols,
                          const uint8_t *xq, int64_t xq_bytes, int64_t tokens, float *y,
                          int64_t r0, int64_t r1) {
    const dot_fn dot = LV(DOT)[t->index];
    const int64_t row_bytes = cols / t->block * t->bytes, n = cols / t->block;
    for (int64_t r = r0; r < r1; r++)
        for (int64_t tk = 0; tk < tokens; tk++)
            y[tk * rows + r] = dot(w + r * row_bytes, xq + tk * xq_bytes, n);
}

/* Each token's row of x (cols values) quantized to the activation type a (xq_bytes a row). */
static void LV(quantize_rows)(int a, const float *x, int64_t cols, int64_t tokens, uint8_t *xq,
                              int64_t xq_bytes) {
    for (int64_t tk = 0; tk < tokens; tk++) {
        if (a == A_Q8_K)
            LV(quantize_q8_k)(x + tk * cols, xq + tk * xq_bytes, cols / QK_K);
        else
            LV(quantize_q8_0)(x + tk * cols, xq + tk * xq_bytes, cols / 32, a == A_Q8_1);
    }
}
