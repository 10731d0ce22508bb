/* The legacy types' integer dot products (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1 against Q8_0 or Q8_1) in
 * vector registers, as ggml-cpu's AVX2 vec_dot_*_q8_* take them; included by _qmatmul_q8.h at the
 * AVX2 and AVX-512 levels with LEG(name) naming the copy, and at AVX-512 a second time under
 * #pragma GCC target("avx512vnni"), chosen when the CPU reports VNNI (choose_level's vnni).
 *
 * Each block's 32 products as 8 exact int32 lanes, lane j = Σ q_w·q_x over the block's values
 * 4j..4j+3 (the order _qmatmul_q8.h's top comment gives): without VNNI a vpmaddubsw on the
 * unsigned quants (|pair| <= 2·31·128) and a vpmaddwd of its pairs, Σ(q − c)·q_x taken as
 * Σq·q_x − c·Σq_x on the int16 pairs (c = 8, 16: |pair| <= 12,032); Q8_0's int8 by int8 as two
 * vpmaddwd on bytes sign-extended in place (bytes 4j and 4j + 2, then 4j + 1 and 4j + 3), so
 * that −128 is exact. With VNNI one vpdpbusd on the unsigned quants, begun from −c·Σq_x of each
 * lane (Q8_0: its quants + 128, c = 128); Q5's fifth bits, where AVX-512 has them, as a mask.
 * One row at a time, its blocks in order: a decode's matrices stream from memory, and rows taken
 * four at once (each a stream of its own) read them at half the speed (Q8_0, 5 matrices of
 * 4,096 x 4,096 in turn) where one row's 8 accumulators keep the integer work ahead of it.
 */

#ifndef LEGACY_TYPES
#define LEGACY_TYPES
/* By the legacy index: bytes a weight block, where its quants and Q5's fifth bits start, the
 * activation block's bytes and where its quants start, and the offset c of the quants. */
enum { L_Q8_0, L_Q4_0, L_Q4_1, L_Q5_0, L_Q5_1 };
static const int L_WBYTES[5] = {34, 18, 20, 22, 24}, L_QS[5] = {2, 2, 4, 6, 8};
static const int L_QH[5] = {0, 0, 0, 2, 4}, L_XBYTES[5] = {34, 34, 36, 34, 36};
static const int L_XQS[5] = {2, 2, 4, 2, 4}, L_OFFSET[5] = {128, 8, 0, 16, 0};
#define L_MIN(type) ((type) == L_Q4_1 || (type) == L_Q5_1) /* + m_w·s_x a block */
#endif

/* ggml's hsum_float_8: ((a0 + a4) + (a2 + a6)) + ((a1 + a5) + (a3 + a7)). */
static ALWAYS_INLINE float LEG(hsum8)(__m256 a) {
    __m128 h = _mm_add_ps(_mm256_extractf128_ps(a, 1), _mm256_castps256_ps128(a));
    h = _mm_add_ps(h, _mm_movehl_ps(h, h));
    h = _mm_add_ss(h, _mm_movehdup_ps(h));
    return _mm_cvtss_f32(h);
}

/* A block's 32 quants as unsigned bytes in value order: the 16 low nibbles, then the 16 high
 * (Q5: each with its fifth bit, bit l of qh for value l, as 16). */
static ALWAYS_INLINE __m256i LEG(quants)(int type, const uint8_t *w) {
    const __m128i bytes = _mm_loadu_si128((const __m128i *)(w + L_QS[type]));
    const __m256i b = _mm256_broadcastsi128_si256(bytes);
    __m256i q = _mm256_and_si256(_mm256_srlv_epi32(b, _mm256_setr_epi32(0, 0, 0, 0, 4, 4, 4, 4)),
                                 _mm256_set1_epi8(0xF));  /* the high half's bytes >> 4 */
#if defined(__AVX512BW__) && defined(__AVX512VL__)
    if (type == L_Q5_0 || type == L_Q5_1)  /* qh as a mask of the bytes: + 16 where set */
        q = _mm256_mask_add_epi8(q, _cvtu32_mask32(u32(w + L_QH[type])), q, _mm256_set1_epi8(0x10));
#else
    if (type == L_Q5_0 || type == L_Q5_1) {
        const __m256i spread = _mm256_shuffle_epi8(  /* byte l: qh's byte l / 8 */
            _mm256_set1_epi32((int32_t)u32(w + L_QH[type])),
            _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0));
        const __m256i bit = _mm256_set1_epi64x((int64_t)0x8040201008040201);  /* bit l % 8 */
        const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit);
        q = _mm256_or_si256(q, _mm256_and_si256(set, _mm256_set1_epi8(0x10)));
    }
#endif
    return q;
}

#if defined(__AVX512VNNI__)
/* A weight block's 8 lanes against y, begun from base (−c·Σq_x a lane): exact int32. */
static ALWAYS_INLINE __m256i LEG(lanes)(int type, const uint8_t *w, __m256i y, __m256i base,
                                        __m256i unused) {
    (void)unused;
    if (type == L_Q8_0)  /* (q + 128)·q_x, the 128·Σq_x in base */
        return _mm256_dpbusd_epi32(base, _mm256_xor_si256(
            _mm256_loadu_si256((const __m256i *)(w + 2)), _mm256_set1_epi8((char)0x80)), y);
    return _mm256_dpbusd_epi32(base, LEG(quants)(type, w), y);
}

/* What the rows share of an activation block: −c·Σq_x of each lane (zero where c = 0). */
static ALWAYS_INLINE void LEG(share)(int type, __m256i y, __m256i *a, __m256i *b) {
    const __m256i zero = _mm256_setzero_si256();
    *a = L_OFFSET[type] ? _mm256_sub_epi32(zero, _mm256_dpbusd_epi32(
                              zero, _mm256_set1_epi8((char)L_OFFSET[type]), y)) : zero;
    *b = zero;
}
#else
/* Each 16-bit word's low byte, sign-extended (the high byte's: srai by 8). */
static ALWAYS_INLINE __m256i LEG(even_bytes)(__m256i v) {
    return _mm256_srai_epi16(_mm256_slli_epi16(v, 8), 8);
}

static ALWAYS_INLINE __m256i LEG(lanes)(int type, const uint8_t *w, __m256i y, __m256i a,
                                        __m256i b) {
    if (type == L_Q8_0) {  /* a, b: q_x's bytes 4j, 4j + 2 and 4j + 1, 4j + 3 as int16 */
        const __m256i v = _mm256_loadu_si256((const __m256i *)(w + 2));
        return _mm256_add_epi32(_mm256_madd_epi16(LEG(even_bytes)(v), a),
                                _mm256_madd_epi16(_mm256_srai_epi16(v, 8), b));
    }
    __m256i p = _mm256_maddubs_epi16(LEG(quants)(type, w), y);
    if (L_OFFSET[type]) p = _mm256_sub_epi16(p, a);  /* a: c·(q_x + q_x) of each pair */
    return _mm256_madd_epi16(p, _mm256_set1_epi16(1));
}

static ALWAYS_INLINE void LEG(share)(int type, __m256i y, __m256i *a, __m256i *b) {
    if (type == L_Q8_0) {
        *a = LEG(even_bytes)(y);
        *b = _mm256_srai_epi16(y, 8);
    } else {
        *a = _mm256_maddubs_epi16(_mm256_set1_epi8((char)L_OFFSET[type]), y);
        *b = *a;
    }
}
#endif

/* A block's f16 d and the half after it (m for Q4_1 and Q5_1) as float32 lanes 0 and 1 (one
 * vcvtph2ps: exact). */
static ALWAYS_INLINE __m128 LEG(scales)(const uint8_t *p) {
    return _mm_cvtph_ps(_mm_cvtsi32_si128((int32_t)u32(p)));
}

/* One row of one type against one token's n activation blocks. A block's d_w·d_x and m_w·s_x
 * are one vmulps of (d_w, m_w) by (d_x, s_x) (each a product of two halves: exact in float32),
 * and Σ m_w·s_x is lane 1 of a vector sum, block after block. */
static ALWAYS_INLINE float LEG(dot)(int type, const uint8_t *w, const uint8_t *x, int64_t n) {
    const int wb = L_WBYTES[type], xb = L_XBYTES[type];
    __m256 acc = _mm256_setzero_ps();
    __m128 summs = _mm_setzero_ps();
    for (int64_t b = 0; b < n; b++, x += xb, w += wb) {
        const __m256i y = _mm256_loadu_si256((const __m256i *)(x + L_XQS[type]));
        const __m128 ds = _mm_mul_ps(LEG(scales)(w), LEG(scales)(x));  /* d_w·d_x, m_w·s_x */
        __m256i sa, sb;
        LEG(share)(type, y, &sa, &sb);
        const __m256i lanes = LEG(lanes)(type, w, y, sa, sb);
        acc = _mm256_fmadd_ps(_mm256_broadcastss_ps(ds), _mm256_cvtepi32_ps(lanes),
                              acc);  /* the lanes exact as float32 */
        if (L_MIN(type)) summs = _mm_add_ps(summs, ds);
    }
    return L_MIN(type) ? LEG(hsum8)(acc) + _mm_cvtss_f32(_mm_movehdup_ps(summs)) : LEG(hsum8)(acc);
}

static float LEG(dot_q8_0)(const uint8_t *w, const uint8_t *x, int64_t n) {
    return LEG(dot)(L_Q8_0, w, x, n);
}
static float LEG(dot_q4_0)(const uint8_t *w, const uint8_t *x, int64_t n) {
    return LEG(dot)(L_Q4_0, w, x, n);
}
static float LEG(dot_q4_1)(const uint8_t *w, const uint8_t *x, int64_t n) {
    return LEG(dot)(L_Q4_1, w, x, n);
}
static float LEG(dot_q5_0)(const uint8_t *w, const uint8_t *x, int64_t n) {
    return LEG(dot)(L_Q5_0, w, x, n);
}
static float LEG(dot_q5_1)(const uint8_t *w, const uint8_t *x, int64_t n) {
    return LEG(dot)(L_Q5_1, w, x, n);
}
