/* IEEE half to float32, shared by _dequant.c and _qmatmul.c (each includes it once). */
#ifndef ATTNCLI_HALF_H
#define ATTNCLI_HALF_H

#include <stdint.h>
#include <string.h>

static inline float from_bits(uint32_t bits) { float f; memcpy(&f, &bits, 4); return f; }

static inline uint32_t to_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }

/* IEEE half (little-endian bytes) to float32, exactly: subnormals, infinities, NaN payloads.
 * A normal half's exponent is rebiased in its bits (+112, exact); a subnormal half is its
 * 10-bit mantissa, converted exactly, times 2^-24 (a product of normal floats: a subnormal
 * operand would cost this CPU a slow assist on every block of a file whose scales are tiny);
 * infinity and NaN keep their payload. No branch, so loops of halves vectorise. */
static inline float half_bits(uint32_t h) {
    uint32_t sign = (h & 0x8000u) << 16, e = h & 0x7c00u, m = h & 0x3ffu;
    uint32_t normal = ((h & 0x7fffu) << 13) + (112u << 23);
    uint32_t small = to_bits((float)m * 0x1p-24f);
    uint32_t special = 0x7f800000u | (m << 13);
    uint32_t is_special = 0u - (uint32_t)(e == 0x7c00u), is_small = 0u - (uint32_t)(e == 0);
    return from_bits(sign | (special & is_special) | (small & is_small) |
                     (normal & ~(is_special | is_small)));  /* masks, not branches */
}

static inline float f16(const uint8_t *p) {
    return half_bits((uint32_t)p[0] | ((uint32_t)p[1] << 8));
}

#endif
