/* The kernels of _qmatmul.c at one vector level, included once per level with LV(name) naming
 * that level's copy and the compiler's target set for it (#pragma GCC target), so each copy is
 * vectorised for the instructions its level promises: x86-64 baseline (SSE2), AVX2 + FMA,
 * AVX-512; elsewhere once, at the compiler's own target (NEON on 64-bit ARM).
 *
 * Weights are dequantized to float32 exactly as _dequant.c does (the gguf package's numerics,
 * bit for bit: the same products and sums, each rounded), a chunk of a row at a time, into a
 * buffer the size of the first-level cache, and multiplied with the activations from there; the
 * one-token kernels of the types a decode reads most (AVX2 and AVX-512: Q4_0, Q4_1, Q8_0, and
 * in _qmatmul_avx2.h Q5_K, F16, BF16) make the same weights in registers and add them into the
 * same lanes (use_level(level, 0) takes the chunks instead, for the tests). One token's Q4_K
 * and Q6_K are taken on integers instead (_qmatmul_fixed.h, which says how near they are).
 * Only the order of the dot product's sums differs from a float32 matmul:
 *   matvec: lane i (0..63) of a row sums w_k·x_k over k ≡ i (mod 64) in order, one fused
 *           multiply-add each (a product and an add where the level has no FMA); the 64 lanes
 *           are added in a fixed tree (lane i + lane i+32, then +16, ...).
 *   matmat: per chunk of KC values, 16 lanes k ≡ i (mod 16) the same way, added in a tree;
 *           the row's chunk sums added in order onto 0.
 * Each output depends on its row, its token and the level only: any split of the rows across
 * threads, and any tiling, gives the same bits.
 */

/* A half to float32: one instruction where the level has F16C (exact, as f16() is). */
#if defined(__F16C__)
static ALWAYS_INLINE float LV(half)(const uint8_t *p) {
    uint16_t h;
    memcpy(&h, p, 2);
    return _cvtsh_ss(h);
}
#else
static ALWAYS_INLINE float LV(half)(const uint8_t *p) { return f16(p); }
#endif

/* One block type's blocks → float32, as _dequant.c writes them (n blocks). */
static void LV(rows_f32)(const uint8_t *x, float *y, int64_t n) { memcpy(y, x, n * 4); }

static void LV(rows_f16)(const uint8_t *x, float *y, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = LV(half)(x + 2 * i);
}

static void LV(rows_bf16)(const uint8_t *x, float *y, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        y[i] = from_bits(((uint32_t)x[2 * i] << 16) | ((uint32_t)x[2 * i + 1] << 24));
}

static void LV(blocks_q8_0)(const uint8_t *x, float *y, int64_t n) {
    for (int64_t b = 0; b < n; b++, x += 34, y += 32) {
        float d = LV(half)(x);
        for (int l = 0; l < 32; l++) y[l] = (float)(int8_t)x[2 + l] * d;
    }
}

static void LV(blocks_q4_0)(const uint8_t *x, float *y, int64_t n) {
    for (int64_t b = 0; b < n; b++, x += 18, y += 32) {
        float d = LV(half)(x);
        const uint8_t *q = x + 2;
        for (int l = 0; l < 16; l++) {
            y[l] = d * (float)((int)(q[l] & 0xF) - 8);
            y[l + 16] = d * (float)((int)(q[l] >> 4) - 8);
        }
    }
}

static void LV(blocks_q4_1)(const uint8_t *x, float *y, int64_t n) {
    for (int64_t b = 0; b < n; b++, x += 20, y += 32) {
        float d = LV(half)(x), m = LV(half)(x + 2);
        const uint8_t *q = x + 4;
        for (int l = 0; l < 16; l++) {
            y[l] = d * (float)(q[l] & 0xF) + m;
            y[l + 16] = d * (float)(q[l] >> 4) + m;
        }
    }
}

static void LV(blocks_q5_0)(const uint8_t *x, float *y, int64_t n) {
    for (int64_t b = 0; b < n; b++, x += 22, y += 32) {
        float d = LV(half)(x);
        uint32_t qh = u32(x + 2);
        const uint8_t *q = x + 6;
        for (int l = 0; l < 16; l++) {
            int lo = (q[l] & 0xF) | (int)(((qh >> l) & 1u) << 4);
            int hi = (q[l] >> 4) | (int)(((qh >> (l + 16)) & 1u) << 4);
            y[l] = d * (float)(lo - 16);
            y[l + 16] = d * (float)(hi - 16);
        }
    }
}

static void LV(blocks_q5_1)(const uint8_t *x, float *y, int64_t n) {
    for (int64_t b = 0; b < n; b++, x += 24, y += 32) {
        float d = LV(half)(x), m = LV(half)(x + 2);
        uint32_t qh = u32(x + 4);
        const uint8_t *q = x + 8;
        for (int l = 0; l < 16; l++) {
            int lo = (q[l] & 0xF) | (int)(((qh >> l) & 1u) << 4);
            int hi = (q[l] >> 4) | (int)(((qh >> (l + 16)) & 1u) << 4);
            y[l] = d * (float)lo + m;
            y[l + 16] = d * (float)hi + m;
        }
    }
}

/* Q4_K: d, dmin, scales[12], qs[128]; 8 groups of 32, group 2c + k in nibble k of qs[32c..]. */
static void LV(blocks_q4_k)(const uint8_t *x, float *y, int64_t n) {
    for (int64_t b = 0; b < n; b++, x += 144, y += QK_K) {
        float dl[8], ml[8];
        scale_min_k(x + 4, LV(half)(x), LV(half)(x + 2), dl, ml);
        const uint8_t *qs = x + 16;
        for (int c = 0; c < 4; c++)
            for (int l = 0; l < 32; l++) {
                y[64 * c + l] = dl[2 * c] * (float)(qs[32 * c + l] & 0xF) - ml[2 * c];
                y[64 * c + 32 + l] = dl[2 * c + 1] * (float)(qs[32 * c + l] >> 4) - ml[2 * c + 1];
            }
    }
}

/* Q5_K: Q4_K's fields with qh[32] before qs; group g's fifth bits are bit g of qh[l]. */
static void LV(blocks_q5_k)(const uint8_t *x, float *y, int64_t n) {
    for (int64_t b = 0; b < n; b++, x += 176, y += QK_K) {
        float dl[8], ml[8];
        scale_min_k(x + 4, LV(half)(x), LV(half)(x + 2), dl, ml);
        const uint8_t *qh = x + 16, *qs = x + 48;
        for (int c = 0; c < 4; c++)
            for (int l = 0; l < 32; l++) {
                int lo = (qs[32 * c + l] & 0xF) | (((qh[l] >> (2 * c)) & 1) << 4);
                int hi = (qs[32 * c + l] >> 4) | (((qh[l] >> (2 * c + 1)) & 1) << 4);
                y[64 * c + l] = dl[2 * c] * (float)lo - ml[2 * c];
                y[64 * c + 32 + l] = dl[2 * c + 1] * (float)hi - ml[2 * c + 1];
            }
    }
}

/* Q6_K: ql[128], qh[64], scales[16] (int8), d; 16 groups of 16, values offset by 32. */
static void LV(blocks_q6_k)(const uint8_t *x, float *y, int64_t n) {
    for (int64_t b = 0; b < n; b++, x += 210, y += QK_K) {
        const uint8_t *ql = x, *qh = x + 128;
        float d = LV(half)(x + 208), dl[16];
        for (int s = 0; s < 16; s++) dl[s] = d * (float)(int8_t)x[192 + s];
        for (int h = 0; h < 2; h++)  /* each half: 128 values from ql[64h..], qh[32h..] */
            for (int l = 0; l < 32; l++) {
                const uint8_t lo0 = ql[64 * h + l], lo1 = ql[64 * h + 32 + l];
                const uint8_t hb = qh[32 * h + l];
                int q0 = (lo0 & 0xF) | ((hb & 3) << 4), q1 = (lo1 & 0xF) | (((hb >> 2) & 3) << 4);
                int q2 = (lo0 >> 4) | (((hb >> 4) & 3) << 4), q3 = (lo1 >> 4) | ((hb >> 6) << 4);
                float *o = y + 128 * h;
                const float *s = dl + 8 * h + l / 16;
                o[l] = s[0] * (float)(q0 - 32);
                o[32 + l] = s[2] * (float)(q1 - 32);
                o[64 + l] = s[4] * (float)(q2 - 32);
                o[96 + l] = s[6] * (float)(q3 - 32);
            }
    }
}

#if defined(__AVX512F__)
/* The hot types written out in AVX-512, the same float32 operations in the same order
 * (a product, then a sum or difference, each rounded): bytes widened to 32-bit lanes. */
static ALWAYS_INLINE void LV(put16)(float *y, __m512i q, __m512 scale, __m512 offset, int sub) {
    __m512 p = _mm512_mul_ps(scale, _mm512_cvtepi32_ps(q));  /* sub 2: no offset */
    _mm512_storeu_ps(y, sub == 2 ? p : sub ? _mm512_sub_ps(p, offset) : _mm512_add_ps(p, offset));
}

static void LV(fast_f16)(const uint8_t *x, float *y, int64_t n) {
    int64_t i = 0;  /* vcvtph2ps converts every half exactly, as f16() does */
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(y + i, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(x + 2 * i))));
    for (; i < n; i++) y[i] = LV(half)(x + 2 * i);
}

static void LV(fast_bf16)(const uint8_t *x, float *y, int64_t n) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512i h = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(x + 2 * i)));
        _mm512_storeu_ps(y + i, _mm512_castsi512_ps(_mm512_slli_epi32(h, 16)));
    }
    for (; i < n; i++)
        y[i] = from_bits(((uint32_t)x[2 * i] << 16) | ((uint32_t)x[2 * i + 1] << 24));
}

static void LV(fast_q8_0)(const uint8_t *x, float *y, int64_t n) {
    const __m512 zero = _mm512_setzero_ps();
    for (int64_t b = 0; b < n; b++, x += 34, y += 32) {
        __m512 d = _mm512_set1_ps(LV(half)(x));
        for (int h = 0; h < 2; h++)  /* q·d + 0 rounds as q·d: one product */
            LV(put16)(y + 16 * h, _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(x + 2 + 16 * h))),
                      d, zero, 2);
    }
}

static ALWAYS_INLINE void LV(nibbles32)(const uint8_t *q, float *y, float dlo, float mlo, float dhi,
                                        float mhi, int sub) {
    /* 32 bytes: low nibbles → y[0..32) as dlo·q ∓ mlo, high nibbles → y[32..64) */
    const __m256i mask = _mm256_set1_epi8(0x0F);
    __m256i v = _mm256_loadu_si256((const __m256i *)q);
    __m256i lo = _mm256_and_si256(v, mask), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), mask);
    __m512 a = _mm512_set1_ps(dlo), b = _mm512_set1_ps(mlo);
    __m512 c = _mm512_set1_ps(dhi), e = _mm512_set1_ps(mhi);
    LV(put16)(y, _mm512_cvtepu8_epi32(_mm256_castsi256_si128(lo)), a, b, sub);
    LV(put16)(y + 16, _mm512_cvtepu8_epi32(_mm256_extracti128_si256(lo, 1)), a, b, sub);
    LV(put16)(y + 32, _mm512_cvtepu8_epi32(_mm256_castsi256_si128(hi)), c, e, sub);
    LV(put16)(y + 48, _mm512_cvtepu8_epi32(_mm256_extracti128_si256(hi, 1)), c, e, sub);
}

static void LV(fast_q4_k)(const uint8_t *x, float *y, int64_t n) {
    for (int64_t b = 0; b < n; b++, x += 144, y += QK_K) {
        float dl[8], ml[8];
        scale_min_k(x + 4, LV(half)(x), LV(half)(x + 2), dl, ml);
        for (int c = 0; c < 4; c++)
            LV(nibbles32)(x + 16 + 32 * c, y + 64 * c, dl[2 * c], ml[2 * c], dl[2 * c + 1],
                          ml[2 * c + 1], 1);
    }
}

static void LV(fast_q4_0)(const uint8_t *x, float *y, int64_t n) {
    const __m512i eight = _mm512_set1_epi32(8);
    const __m512 zero = _mm512_setzero_ps();
    for (int64_t b = 0; b < n; b++, x += 18, y += 32) {
        __m512 d = _mm512_set1_ps(LV(half)(x));
        __m512i q = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(x + 2)));
        __m512i lo = _mm512_and_si512(q, _mm512_set1_epi32(0xF)), hi = _mm512_srli_epi32(q, 4);
        LV(put16)(y, _mm512_sub_epi32(lo, eight), d, zero, 2);
        LV(put16)(y + 16, _mm512_sub_epi32(hi, eight), d, zero, 2);
    }
}

static void LV(fast_q4_1)(const uint8_t *x, float *y, int64_t n) {
    for (int64_t b = 0; b < n; b++, x += 20, y += 32) {
        __m512 d = _mm512_set1_ps(LV(half)(x)), m = _mm512_set1_ps(LV(half)(x + 2));
        __m512i q = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(x + 4)));
        LV(put16)(y, _mm512_and_si512(q, _mm512_set1_epi32(0xF)), d, m, 0);
        LV(put16)(y + 16, _mm512_srli_epi32(q, 4), d, m, 0);
    }
}

static void LV(fast_q6_k)(const uint8_t *x, float *y, int64_t n) {
    const __m512 zero = _mm512_setzero_ps();
    const __m512i low4 = _mm512_set1_epi32(0xF), two = _mm512_set1_epi32(3);
    const __m512i off = _mm512_set1_epi32(32);
    for (int64_t b = 0; b < n; b++, x += 210, y += QK_K) {
        const uint8_t *ql = x, *qh = x + 128;
        float d = LV(half)(x + 208), dl[16];
        for (int s = 0; s < 16; s++) dl[s] = d * (float)(int8_t)x[192 + s];
        for (int h = 0; h < 2; h++)
            for (int l = 0; l < 32; l += 16) {
                __m512i a = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(ql + 64 * h + l)));
                __m512i c = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(ql + 64 * h + 32 + l)));
                __m512i e = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(qh + 32 * h + l)));
                __m512i q0 = _mm512_or_si512(_mm512_and_si512(a, low4),
                                             _mm512_slli_epi32(_mm512_and_si512(e, two), 4));
                __m512i q1 = _mm512_or_si512(_mm512_and_si512(c, low4),
                                             _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(e, 2), two), 4));
                __m512i q2 = _mm512_or_si512(_mm512_srli_epi32(a, 4),
                                             _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(e, 4), two), 4));
                __m512i q3 = _mm512_or_si512(_mm512_srli_epi32(c, 4),
                                             _mm512_slli_epi32(_mm512_srli_epi32(e, 6), 4));
                const float *s = dl + 8 * h + l / 16;
                float *o = y + 128 * h + l;
                LV(put16)(o, _mm512_sub_epi32(q0, off), _mm512_set1_ps(s[0]), zero, 2);
                LV(put16)(o + 32, _mm512_sub_epi32(q1, off), _mm512_set1_ps(s[2]), zero, 2);
                LV(put16)(o + 64, _mm512_sub_epi32(q2, off), _mm512_set1_ps(s[4]), zero, 2);
                LV(put16)(o + 96, _mm512_sub_epi32(q3, off), _mm512_set1_ps(s[6]), zero, 2);
            }
    }
}
#define FAST(plain, fast) LV(fast)
#define FAST_A(plain, fast) LV(fast)
#else
#define FAST(plain, fast) LV(plain)
#if defined(__AVX2__)
/* Q6_K's blocks in AVX2 (the panel of the prompt's products): blocks_q6_k's products, 8 wide. */
static void LV(fast_q6_k)(const uint8_t *x, float *y, int64_t n) {
    const __m256i low4 = _mm256_set1_epi32(0xF), two = _mm256_set1_epi32(3);
    const __m256i off = _mm256_set1_epi32(32);
    for (int64_t b = 0; b < n; b++, x += 210, y += QK_K) {
        const uint8_t *ql = x, *qh = x + 128;
        float d = LV(half)(x + 208), dl[16];
        for (int g = 0; g < 16; g++) dl[g] = d * (float)(int8_t)x[192 + g];
        for (int h = 0; h < 2; h++)
            for (int l = 0; l < 32; l += 8) {
#define BYTES8(p) _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(p)))
                __m256i lo0 = BYTES8(ql + 64 * h + l), lo1 = BYTES8(ql + 64 * h + 32 + l);
                __m256i hb = BYTES8(qh + 32 * h + l);
#undef BYTES8
                __m256i q[4] = {
                    _mm256_or_si256(_mm256_and_si256(lo0, low4),
                                    _mm256_slli_epi32(_mm256_and_si256(hb, two), 4)),
                    _mm256_or_si256(_mm256_and_si256(lo1, low4),
                                    _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(hb, 2), two), 4)),
                    _mm256_or_si256(_mm256_srli_epi32(lo0, 4),
                                    _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(hb, 4), two), 4)),
                    _mm256_or_si256(_mm256_srli_epi32(lo1, 4),
                                    _mm256_slli_epi32(_mm256_srli_epi32(hb, 6), 4))};
                for (int j = 0; j < 4; j++)
                    _mm256_storeu_ps(y + 128 * h + 32 * j + l,
                                     _mm256_mul_ps(_mm256_set1_ps(dl[8 * h + 2 * j + l / 16]),
                                                   _mm256_cvtepi32_ps(_mm256_sub_epi32(q[j], off))));
            }
    }
}

/* Q4_0, Q4_1 and F16 in AVX2, as the AVX-512 versions: 8 values a vector, the same products. */
static void LV(fast_q4_0)(const uint8_t *x, float *y, int64_t n) {
    const __m256i low4 = _mm256_set1_epi32(0xF), eight = _mm256_set1_epi32(8);
    for (int64_t b = 0; b < n; b++, x += 18, y += 32) {
        __m256 d = _mm256_set1_ps(LV(half)(x));
        for (int h = 0; h < 2; h++) {
            __m256i v = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(x + 2 + 8 * h)));
            __m256i lo = _mm256_sub_epi32(_mm256_and_si256(v, low4), eight);
            __m256i hi = _mm256_sub_epi32(_mm256_srli_epi32(v, 4), eight);
            _mm256_storeu_ps(y + 8 * h, _mm256_mul_ps(d, _mm256_cvtepi32_ps(lo)));
            _mm256_storeu_ps(y + 16 + 8 * h, _mm256_mul_ps(d, _mm256_cvtepi32_ps(hi)));
        }
    }
}

static void LV(fast_q4_1)(const uint8_t *x, float *y, int64_t n) {
    const __m256i low4 = _mm256_set1_epi32(0xF);
    for (int64_t b = 0; b < n; b++, x += 20, y += 32) {
        __m256 d = _mm256_set1_ps(LV(half)(x)), m = _mm256_set1_ps(LV(half)(x + 2));
        for (int h = 0; h < 2; h++) {
            __m256i v = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(x + 4 + 8 * h)));
            __m256 lo = _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_and_si256(v, low4)));
            __m256 hi = _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_srli_epi32(v, 4)));
            _mm256_storeu_ps(y + 8 * h, _mm256_add_ps(lo, m));
            _mm256_storeu_ps(y + 16 + 8 * h, _mm256_add_ps(hi, m));
        }
    }
}

static void LV(fast_f16)(const uint8_t *x, float *y, int64_t n) {
    int64_t i = 0;  /* vcvtph2ps (F16C) converts every half exactly, as f16() does */
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(x + 2 * i))));
    for (; i < n; i++) y[i] = LV(half)(x + 2 * i);
}
#define FAST_A(plain, fast) LV(fast)
#else
#define FAST_A(plain, fast) LV(plain)
#endif
#endif

static const block_fn LV(DEQUANT)[KINDS] = {
    LV(rows_f32),    FAST_A(rows_f16, fast_f16),     FAST(rows_bf16, fast_bf16),
    FAST(blocks_q8_0, fast_q8_0),    FAST_A(blocks_q4_0, fast_q4_0),
    FAST_A(blocks_q4_1, fast_q4_1),  LV(blocks_q5_0), LV(blocks_q5_1),
    FAST(blocks_q4_k, fast_q4_k),    LV(blocks_q5_k), FAST_A(blocks_q6_k, fast_q6_k),
};
#undef FAST
#undef FAST_A

/* acc[i] += w[k]·x[k] for k ≡ i (mod 64), k < n: the matvec's lanes (see the top). */
static ALWAYS_INLINE void LV(dot64)(const float *w, const float *x, int64_t n, float *acc) {
    int64_t k = 0;
#if defined(__AVX512F__)
    __m512 a0 = _mm512_loadu_ps(acc), a1 = _mm512_loadu_ps(acc + 16);
    __m512 a2 = _mm512_loadu_ps(acc + 32), a3 = _mm512_loadu_ps(acc + 48);
    for (; k + 64 <= n; k += 64) {
        a0 = _mm512_fmadd_ps(_mm512_loadu_ps(w + k), _mm512_loadu_ps(x + k), a0);
        a1 = _mm512_fmadd_ps(_mm512_loadu_ps(w + k + 16), _mm512_loadu_ps(x + k + 16), a1);
        a2 = _mm512_fmadd_ps(_mm512_loadu_ps(w + k + 32), _mm512_loadu_ps(x + k + 32), a2);
        a3 = _mm512_fmadd_ps(_mm512_loadu_ps(w + k + 48), _mm512_loadu_ps(x + k + 48), a3);
    }
    _mm512_storeu_ps(acc, a0), _mm512_storeu_ps(acc + 16, a1);
    _mm512_storeu_ps(acc + 32, a2), _mm512_storeu_ps(acc + 48, a3);
#elif defined(__AVX2__) && defined(__FMA__)
    __m256 a[8];
    for (int j = 0; j < 8; j++) a[j] = _mm256_loadu_ps(acc + 8 * j);
    for (; k + 64 <= n; k += 64)
        for (int j = 0; j < 8; j++)
            a[j] = _mm256_fmadd_ps(_mm256_loadu_ps(w + k + 8 * j), _mm256_loadu_ps(x + k + 8 * j),
                                   a[j]);
    for (int j = 0; j < 8; j++) _mm256_storeu_ps(acc + 8 * j, a[j]);
#elif defined(__ARM_NEON) && defined(__aarch64__)
    float32x4_t a[16];
    for (int j = 0; j < 16; j++) a[j] = vld1q_f32(acc + 4 * j);
    for (; k + 64 <= n; k += 64)
        for (int j = 0; j < 16; j++)
            a[j] = vfmaq_f32(a[j], vld1q_f32(w + k + 4 * j), vld1q_f32(x + k + 4 * j));
    for (int j = 0; j < 16; j++) vst1q_f32(acc + 4 * j, a[j]);
#else
    for (; k + 64 <= n; k += 64)
        for (int j = 0; j < 64; j++) acc[j] = MULADD(w[k + j], x[k + j], acc[j]);
#endif
    for (; k < n; k++) acc[k & 63] = MULADD(w[k], x[k], acc[k & 63]);
}

#if defined(__AVX2__) && defined(__FMA__)
/* The one-token kernels in registers, compiled at AVX2 and again at AVX-512 (the same 8-lane
 * code, with AVX-512's 32 registers; where they ran only at AVX2, an AVX-512 CPU took the chunk
 * path, 1.3 to 2.5 times slower). Their lanes and order of sums are dot64's at both levels, so
 * at AVX-512 too they give the chunk path's bits. */
/* dot64's 64 lanes held as 8 vectors (lanes 8m..8m+7 in a[m]) added in its fixed tree, lane i
 * + lane i+32, then +16, ... down to +1: the same additions as the scalar tree, in vectors. */
static ALWAYS_INLINE float LV(tree8x8)(__m256 *a) {
    for (int m = 0; m < 4; m++) a[m] = _mm256_add_ps(a[m], a[m + 4]);  /* span 32 */
    a[0] = _mm256_add_ps(a[0], a[2]), a[1] = _mm256_add_ps(a[1], a[3]); /* span 16 */
    __m256 s = _mm256_add_ps(a[0], a[1]);                                /* span 8 */
    __m128 h = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1)); /* 4 */
    h = _mm_add_ps(h, _mm_movehl_ps(h, h));                              /* span 2 */
    h = _mm_add_ss(h, _mm_shuffle_ps(h, h, 1));                          /* span 1 */
    return _mm_cvtss_f32(h);
}

/* The 32-value types' rows without the buffer: block b's 8-value quarters go to lanes
 * 32·(b & 1) + 8j, as dot64 adds a chunk's values k into lane k mod 64, one fused multiply-add
 * each; the weights the AVX2 dequantizers' (fast_q4_0, fast_q4_1) and blocks_q8_0's products.
 * Each block asks for its bytes PREFETCH_AHEAD on (_qmatmul.c). */
#define MATVEC_BLOCK32(NAME, BYTES, ...)                                                       \
    static void LV(NAME)(const uint8_t *w, int64_t cols, const float *x, float *y, int64_t r0, \
                         int64_t r1) {                                                         \
        const int64_t blocks = cols / 32, row_bytes = blocks * (BYTES);                        \
        const __m256i low4 = _mm256_set1_epi32(0xF);                                           \
        (void)low4;                                                                             \
        for (int64_t r = r0; r < r1; r++) {                                                    \
            __m256 a[8];                                                                        \
            for (int m = 0; m < 8; m++) a[m] = _mm256_setzero_ps();                             \
            const uint8_t *blk = w + r * row_bytes;                                             \
            for (int64_t i = 0; i < blocks; i++, blk += (BYTES)) {                             \
                PREFETCH(blk, (BYTES));                                                         \
                __m256 q[4];                                                                    \
                __VA_ARGS__                                                                     \
                const float *xb = x + 32 * i;                                                   \
                if (i & 1)                                                                      \
                    for (int j = 0; j < 4; j++)                                                 \
                        a[4 + j] = _mm256_fmadd_ps(q[j], _mm256_loadu_ps(xb + 8 * j), a[4 + j]); \
                else                                                                            \
                    for (int j = 0; j < 4; j++)                                                 \
                        a[j] = _mm256_fmadd_ps(q[j], _mm256_loadu_ps(xb + 8 * j), a[j]);        \
            }                                                                                   \
            y[r] = LV(tree8x8)(a);                                                              \
        }                                                                                       \
    }

#define NIBBLES8(h) _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(blk + off + 8 * (h))))
/* Q4_0: d·(q − 8); values 8h.. low nibbles of bytes 8h.., 16 + 8h.. their high nibbles. */
MATVEC_BLOCK32(matvec_q4_0, 18, {
    const __m256 d = _mm256_set1_ps(LV(half)(blk));
    const __m256i eight = _mm256_set1_epi32(8);
    const int off = 2;
    for (int h = 0; h < 2; h++) {
        __m256i v = NIBBLES8(h);
        q[h] = _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_and_si256(v, low4), eight)));
        q[2 + h] = _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_srli_epi32(v, 4), eight)));
    }
})
/* Q4_1: d·q + m. */
MATVEC_BLOCK32(matvec_q4_1, 20, {
    const __m256 d = _mm256_set1_ps(LV(half)(blk)), m = _mm256_set1_ps(LV(half)(blk + 2));
    const int off = 4;
    for (int h = 0; h < 2; h++) {
        __m256i v = NIBBLES8(h);
        q[h] = _mm256_add_ps(_mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_and_si256(v, low4))), m);
        q[2 + h] = _mm256_add_ps(_mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_srli_epi32(v, 4))), m);
    }
})
#undef NIBBLES8
/* Q8_0: q·d, 32 signed bytes. */
MATVEC_BLOCK32(matvec_q8_0, 34, {
    const __m256 d = _mm256_set1_ps(LV(half)(blk));
    for (int j = 0; j < 4; j++)
        q[j] = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(
                                 _mm_loadl_epi64((const __m128i *)(blk + 2 + 8 * j)))), d);
})
#undef MATVEC_BLOCK32

/* scale_min_k in vectors: a Q4_K or Q5_K block's eight dl = d·sc and ml = dmin·m (b: the block,
 * its halves d and dmin first), the same products. */
static ALWAYS_INLINE void LV(k_scales)(const uint8_t *b, float d, float dmin, __m256 *dl,
                                       __m256 *ml) {
    uint64_t s, m;  /* the eight six-bit scales and mins, four bytes a word */
    scale_min_k_words(b + 4, &s, &m);
    *dl = _mm256_mul_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(
                            _mm256_cvtepu8_epi32(_mm_cvtsi64_si128((int64_t)s))));
    *ml = _mm256_mul_ps(_mm256_set1_ps(dmin), _mm256_cvtepi32_ps(
                            _mm256_cvtepu8_epi32(_mm_cvtsi64_si128((int64_t)m))));
}

#include "_qmatmul_avx2.h" /* Q5_K, F16 and BF16 one token at a time */

/* The one-token kernel of a type that makes its weights in registers, or NULL (the chunks). */
static row_fn LV(in_registers)(int qtype) {
    switch (qtype) {
    case 1: return LV(matvec_f16);
    case 30: return LV(matvec_bf16);
    case 2: return LV(matvec_q4_0);
    case 3: return LV(matvec_q4_1);
    case 8: return LV(matvec_q8_0);
    case 13: return LV(matvec_q5_k);
    default: return NULL;
    }
}
#define MATVEC_REGISTERS 1
#endif

/* Rows r0..r1 of W (rows of row_bytes, cols values) times x (cols,): y[r]. */
static void LV(matvec)(const kind *t, const uint8_t *w, int64_t cols, const float *x, float *y,
                       int64_t r0, int64_t r1) {
#if defined(MATVEC_REGISTERS)
    const row_fn fast = registers ? LV(in_registers)(t->qtype) : NULL;
    if (fast) {
        fast(w, cols, x, y, r0, r1);
        return;
    }
#endif
    float buf[CHUNK] __attribute__((aligned(64)));
    const block_fn dequant = LV(DEQUANT)[t->index];
    const int64_t row_bytes = cols / t->block * t->bytes;
    for (int64_t r = r0; r < r1; r++) {
        const uint8_t *row = w + r * row_bytes;
        float acc[64] __attribute__((aligned(64))) = {0};
        for (int64_t k = 0; k < cols; k += CHUNK) {
            int64_t n = cols - k < CHUNK ? cols - k : CHUNK;  /* a multiple of the block */
            dequant(row + k / t->block * t->bytes, buf, n / t->block);
            LV(dot64)(buf, x + k, n, acc);
        }
#if !defined(__AVX512F__) && defined(__AVX2__) && defined(__FMA__)
        __m256 a[8];
        for (int m = 0; m < 8; m++) a[m] = _mm256_load_ps(acc + 8 * m);
        y[r] = LV(tree8x8)(a);
#else
        for (int span = 32; span >= 1; span /= 2)
            for (int i = 0; i < span; i++) acc[i] += acc[i + span];
        y[r] = acc[0];
#endif
    }
}

/* The 16 lanes of one (row, token) pair added in the fixed tree. */
static ALWAYS_INLINE float LV(tree16)(float *lanes) {
    for (int span = 8; span >= 1; span /= 2)
        for (int i = 0; i < span; i++) lanes[i] += lanes[i + span];
    return lanes[0];
}

/* y[t·rows + r] += Σ_k w[r][k]·x[t][k] over one chunk of n values, for R rows of the panel
 * (w: KC apart) and NT tokens (x: cols apart): 16 lanes each, added in tree16. */
#define LV_MICRO(R, NT)                                                                         \
    static void LV(micro_##R##x##NT)(const float *w, const float *x, int64_t cols, int64_t n, \
                                      float *y, int64_t rows) {                               \
        float lanes[R][NT][16] __attribute__((aligned(64)));                                   \
        MICRO_BODY(R, NT)                                                                      \
        for (int i = 0; i < R; i++)                                                            \
            for (int j = 0; j < NT; j++) y[j * rows + i] += LV(tree16)(lanes[i][j]);           \
    }

#if defined(__AVX512F__)
#define MICRO_BODY(R, NT)                                                                       \
    __m512 acc[R][NT];                                                                          \
    for (int i = 0; i < R; i++)                                                                 \
        for (int j = 0; j < NT; j++) acc[i][j] = _mm512_setzero_ps();                           \
    for (int64_t k = 0; k < n; k += 16) {                                                      \
        __mmask16 m = n - k >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (n - k)) - 1);      \
        __m512 wv[R], xv[NT];                                                                   \
        for (int i = 0; i < R; i++) wv[i] = _mm512_maskz_loadu_ps(m, w + i * KC + k);           \
        for (int j = 0; j < NT; j++) xv[j] = _mm512_maskz_loadu_ps(m, x + j * cols + k);        \
        for (int i = 0; i < R; i++)                                                             \
            for (int j = 0; j < NT; j++) acc[i][j] = _mm512_fmadd_ps(wv[i], xv[j], acc[i][j]);  \
    }                                                                                           \
    for (int i = 0; i < R; i++)                                                                 \
        for (int j = 0; j < NT; j++) _mm512_store_ps(lanes[i][j], acc[i][j]);
#elif defined(__AVX2__) && defined(__FMA__)
#define MICRO_BODY(R, NT)                                                                       \
    __m256 lo[R][NT], hi[R][NT];                                                                \
    for (int i = 0; i < R; i++)                                                                 \
        for (int j = 0; j < NT; j++) lo[i][j] = hi[i][j] = _mm256_setzero_ps();                 \
    int64_t k = 0;                                                                              \
    for (; k + 16 <= n; k += 16) {                                                             \
        __m256 wl[R], wh[R];                                                                    \
        for (int i = 0; i < R; i++) {                                                           \
            wl[i] = _mm256_loadu_ps(w + i * KC + k);                                            \
            wh[i] = _mm256_loadu_ps(w + i * KC + k + 8);                                        \
        }                                                                                       \
        for (int j = 0; j < NT; j++) {                                                          \
            __m256 xl = _mm256_loadu_ps(x + j * cols + k), xh = _mm256_loadu_ps(x + j * cols + k + 8); \
            for (int i = 0; i < R; i++) {                                                       \
                lo[i][j] = _mm256_fmadd_ps(wl[i], xl, lo[i][j]);                                \
                hi[i][j] = _mm256_fmadd_ps(wh[i], xh, hi[i][j]);                                \
            }                                                                                   \
        }                                                                                       \
    }                                                                                           \
    for (int i = 0; i < R; i++)                                                                 \
        for (int j = 0; j < NT; j++) {                                                          \
            _mm256_store_ps(lanes[i][j], lo[i][j]);                                             \
            _mm256_store_ps(lanes[i][j] + 8, hi[i][j]);                                         \
            for (int64_t kk = k; kk < n; kk++)                                                  \
                lanes[i][j][kk - k] = fmaf(w[i * KC + kk], x[j * cols + kk], lanes[i][j][kk - k]); \
        }
#else
#define MICRO_BODY(R, NT)                                                                       \
    for (int i = 0; i < R; i++)                                                                 \
        for (int j = 0; j < NT; j++)                                                            \
            for (int l = 0; l < 16; l++) lanes[i][j][l] = 0.0f;                                 \
    for (int64_t k = 0; k < n; k += 16) {                                                      \
        int64_t width = n - k < 16 ? n - k : 16;                                                \
        for (int i = 0; i < R; i++)                                                             \
            for (int j = 0; j < NT; j++)                                                        \
                for (int64_t l = 0; l < width; l++)                                             \
                    lanes[i][j][l] = MULADD(w[i * KC + k + l], x[j * cols + k + l],             \
                                            lanes[i][j][l]);                                    \
    }
#endif

#if defined(__AVX512F__)
/* The 4 × 4 tile with its 16 accumulators named, so they stay in registers. */
static void LV(micro_4x4)(const float *w, const float *x, int64_t cols, int64_t n, float *y,
                          int64_t rows) {
#define ROW4(j) __m512 c0##j = _mm512_setzero_ps(), c1##j = c0##j, c2##j = c0##j, c3##j = c0##j;
    ROW4(0) ROW4(1) ROW4(2) ROW4(3)
    for (int64_t k = 0; k < n; k += 16) {
        __mmask16 m = n - k >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (n - k)) - 1);
        __m512 w0 = _mm512_maskz_loadu_ps(m, w + k), w1 = _mm512_maskz_loadu_ps(m, w + KC + k);
        __m512 w2 = _mm512_maskz_loadu_ps(m, w + 2 * KC + k);
        __m512 w3 = _mm512_maskz_loadu_ps(m, w + 3 * KC + k);
#define TOKEN(j)                                                                                \
    {                                                                                           \
        __m512 xj = _mm512_maskz_loadu_ps(m, x + j * cols + k);                                 \
        c0##j = _mm512_fmadd_ps(w0, xj, c0##j), c1##j = _mm512_fmadd_ps(w1, xj, c1##j);         \
        c2##j = _mm512_fmadd_ps(w2, xj, c2##j), c3##j = _mm512_fmadd_ps(w3, xj, c3##j);         \
    }
        TOKEN(0) TOKEN(1) TOKEN(2) TOKEN(3)
#undef TOKEN
    }
    float lanes[16] __attribute__((aligned(64)));
#define OUT(i, j) _mm512_store_ps(lanes, c##i##j), y[j * rows + i] += LV(tree16)(lanes);
#define OUT4(j) OUT(0, j) OUT(1, j) OUT(2, j) OUT(3, j)
    OUT4(0) OUT4(1) OUT4(2) OUT4(3)
#undef OUT4
#undef OUT
#undef ROW4
}
#else
LV_MICRO(4, 4)
#endif
LV_MICRO(4, 1)
LV_MICRO(1, 4)
LV_MICRO(1, 1)
#undef MICRO_BODY

/* Rows r0..r1 of W times each of the T tokens of x (T, cols): y (T, rows), rows of W
 * dequantized MC at a time, a chunk of KC values each, and multiplied with every token of a
 * tile of NTILE from there. */
static void LV(matmat)(const kind *t, const uint8_t *w, int64_t rows, int64_t cols,
                       const float *x, int64_t tokens, float *y, int64_t r0, int64_t r1,
                       float *panel) {
    const block_fn dequant = LV(DEQUANT)[t->index];
    const int64_t row_bytes = cols / t->block * t->bytes;
    for (int64_t t0 = 0; t0 < tokens; t0 += NTILE) {
        int64_t t1 = t0 + NTILE < tokens ? t0 + NTILE : tokens;
        for (int64_t tk = t0; tk < t1; tk++)
            for (int64_t r = r0; r < r1; r++) y[tk * rows + r] = 0.0f;
        for (int64_t k = 0; k < cols; k += KC) {
            int64_t n = cols - k < KC ? cols - k : KC;  /* a multiple of the block */
            for (int64_t p = r0; p < r1; p += MC) {
                int64_t pr = r1 - p < MC ? r1 - p : MC;
                for (int64_t i = 0; i < pr; i++)
                    dequant(w + (p + i) * row_bytes + k / t->block * t->bytes, panel + i * KC,
                            n / t->block);
                for (int64_t tk = t0; tk < t1;) {
                    int step = t1 - tk >= 4 ? 4 : 1;
                    const float *xt = x + tk * cols + k;
                    float *yt = y + tk * rows + p;
                    int64_t i = 0;
                    for (; i + 4 <= pr; i += 4)
                        (step == 4 ? LV(micro_4x4) : LV(micro_4x1))(panel + i * KC, xt, cols, n,
                                                                     yt + i, rows);
                    for (; i < pr; i++)
                        (step == 4 ? LV(micro_1x4) : LV(micro_1x1))(panel + i * KC, xt, cols, n,
                                                                     yt + i, rows);
                    tk += step;
                }
            }
        }
    }
}
