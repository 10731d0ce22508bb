/* llama.cpp's numerics (--numerics llama.cpp), included once per vector level as
 * _qmatmul_body.h is: the activations quantized to 8 bits the way ggml's reference quantizers
 * do (Q8_0 for Q4_0, Q5_0 and Q8_0 weights; Q8_1 for Q4_1 and Q5_1; Q8_K for the K-types), and
 * each block's dot product taken on the integers, as ggml-cpu's vec_dot_*_q8_* functions do.
 * The integers are exact at every level, whatever instructions take them; the float32 steps
 * after them run in one order per type, the same at every level (the same bits):
 *   K-types: per block an exact int32 sum Σ q_w·q_x (times each group's 6- or 8-bit scale, and
 *     the Q8_K block's per-16 sums times each group's min), then block after block one sum
 *     sum += (d_w·d_x)·isum (− (dmin_w·d_x)·imin for Q4_K and Q5_K).
 *   Legacy types (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0), as ggml-cpu's AVX2 versions add them: each
 *     block's 32 products as 8 exact int32 lanes, lane j = Σ q_w·q_x over values 4j..4j+3; 8
 *     float32 accumulators, block after block acc_j = fma(d_w·d_x, lane_j, acc_j); then
 *     ((acc_0 + acc_4) + (acc_2 + acc_6)) + ((acc_1 + acc_5) + (acc_3 + acc_7)) (hsum_float_8);
 *     Q4_1 and Q5_1's m_w·s_x summed apart block after block and added last.
 * (ggml's other SIMD versions, NEON's for one, add the same terms in other orders: differences
 * of a few roundings.) _qmatmul_q8_legacy.h has the legacy types' vector code.
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

#define LEG(name) LV(name)
#include "_qmatmul_q8_legacy.h"
#undef LEG
#if defined(X86_LEVELS) && defined(__AVX512F__)
#pragma GCC push_options
#pragma GCC target("avx512vnni")
#define LEG(name) LV(name##_vnni)
#include "_qmatmul_q8_legacy.h"
#undef LEG
#pragma GCC pop_options
#define LEGACY_VNNI 1
#endif

#else
/* The legacy types in portable C, in the vector levels' order (the top comment): each block's
 * 8 exact lanes, one float32 fmaf a lane, ggml's hsum_float_8, and m_w·s_x summed apart. */
static ALWAYS_INLINE float LV(legacy_dot)(int type, const uint8_t *w, const uint8_t *x,
                                          int64_t n) {
    static const int wbytes[5] = {34, 18, 20, 22, 24}, qs[5] = {2, 2, 4, 6, 8};
    static const int qhs[5] = {0, 0, 0, 2, 4}, xbytes[5] = {34, 34, 36, 34, 36};
    static const int offset[5] = {0, 8, 0, 16, 0};
    const int five = type >= 3, with_min = type == 2 || type == 4;
    float acc[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f}, summs = 0.0f;
    for (int64_t b = 0; b < n; b++, w += wbytes[type], x += xbytes[type]) {
        const int8_t *q8 = (const int8_t *)(x + (with_min ? 4 : 2));
        int8_t v[32];  /* the block's values, q − c: within int8 for every type */
        if (type == 0) {
            memcpy(v, w + 2, 32);
        } else {
            const uint8_t *q = w + qs[type];
            const uint32_t qh = five ? u32(w + qhs[type]) : 0;
            for (int l = 0; l < 16; l++) {
                v[l] = (int8_t)(((q[l] & 0xF) | (((qh >> l) & 1u) << 4)) - offset[type]);
                v[l + 16] = (int8_t)(((q[l] >> 4) | (((qh >> (l + 16)) & 1u) << 4)) - offset[type]);
            }
        }
        int32_t p[32], lane[8];
        for (int l = 0; l < 32; l++) p[l] = (int32_t)v[l] * q8[l];
        for (int j = 0; j < 8; j++) lane[j] = p[4 * j] + p[4 * j + 1] + p[4 * j + 2] + p[4 * j + 3];
        const float d = LV(half)(w) * LV(half)(x);  /* d_w·d_x */
        for (int j = 0; j < 8; j++)  /* |lane| <= 4·128·128: exact as float */
            acc[j] = fmaf(d, (float)lane[j], acc[j]);
        if (with_min) summs += LV(half)(w + 2) * LV(half)(x + 2);  /* m_w·s_x */
    }
    const float sum = ((acc[0] + acc[4]) + (acc[2] + acc[6])) +
                      ((acc[1] + acc[5]) + (acc[3] + acc[7]));  /* ggml's hsum_float_8 */
    return with_min ? sum + summs : sum;
}

#define LEGACY_DOT(name, type)                                                             \
    static float LV(name)(const uint8_t *w, const uint8_t *x, int64_t n) {                 \
        return LV(legacy_dot)(type, w, x, n);                                              \
    }
LEGACY_DOT(dot_q8_0, 0)
LEGACY_DOT(dot_q4_0, 1)
LEGACY_DOT(dot_q4_1, 2)
LEGACY_DOT(dot_q5_0, 3)
LEGACY_DOT(dot_q5_1, 4)
#undef LEGACY_DOT
#endif

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
        uint64_t s, m;  /* scale_min_k's eight six-bit scales and mins, four bytes a word */
        scale_min_k_words(w + 4, &s, &m);
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

/* By the kernels' index (KIND): the dot (at AVX-512 with VNNI, the legacy types' VNNI copies). */
static const dot_fn LV(DOT)[KINDS] = {
    NULL, NULL, NULL, LV(dot_q8_0), LV(dot_q4_0), LV(dot_q4_1), LV(dot_q5_0), LV(dot_q5_1),
    LV(dot_q4_k), LV(dot_q5_k), LV(dot_q6_k),
};
#if defined(LEGACY_VNNI)
static const dot_fn LV(DOT_vnni)[KINDS] = {
    NULL, NULL, NULL, LV(dot_q8_0_vnni), LV(dot_q4_0_vnni), LV(dot_q4_1_vnni),
    LV(dot_q5_0_vnni), LV(dot_q5_1_vnni), LV(dot_q4_k), LV(dot_q5_k), LV(dot_q6_k),
};
#endif

/* Rows r0..r1 of W against each token's quantized activations (xq: tokens rows of xq_bytes). */
static void LV(matmul_q8)(const kind *t, const uint8_t *w, int64_t rows, int64_t cols,
                          const uint8_t *xq, int64_t xq_bytes, int64_t tokens, float *y,
                          int64_t r0, int64_t r1) {
#if defined(LEGACY_VNNI)
    const dot_fn dot = vnni ? LV(DOT_vnni)[t->index] : LV(DOT)[t->index];
#else
    const dot_fn dot = LV(DOT)[t->index];
#endif
    const int64_t row_bytes = cols / t->block * t->bytes, n = cols / t->block;
    for (int64_t r = r0; r < r1; r++)
        for (int64_t tk = 0; tk < tokens; tk++)
            y[tk * rows + r] = dot(w + r * row_bytes, xq + tk * xq_bytes, n);
}
#undef LEGACY_VNNI

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
