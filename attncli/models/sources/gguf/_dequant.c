/* GGUF blocks to float32 in one pass, with the gguf package's numerics bit for bit.
 *
 * One function per block type writes each block's values from its bytes, in the order and with
 * the float32 operations of the gguf package's numpy dequantizers (gguf/quants.py; llama.cpp's
 * dequantize_row_* compute the same): scales and offsets are multiplied out in float32 first,
 * then each value is scale * q (- or + offset), every product and sum rounded to float32.
 * dequantize() releases the GIL, so dequant.py splits a tensor's blocks across threads. Built
 * by setuptools as an optional extension: without it, dequant.py leaves the work to the gguf
 * package.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <float.h>
#include <stdint.h>
#include <string.h>

/* Each product and sum is rounded to float32 as numpy rounds it: no fused multiply-adds
 * (setup.py passes -ffp-contract=off), no -ffast-math, no x87 intermediates. */
#if defined(__FAST_MATH__) || (defined(FLT_EVAL_METHOD) && FLT_EVAL_METHOD != 0)
#error "attncli's dequantizers need strict float32 arithmetic (no -ffast-math, no x87)"
#endif

#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 12 && defined(__x86_64__) && \
    defined(__GLIBC__) && !defined(ATTNCLI_NO_CLONES)
/* The widest vectors the CPU has, chosen when the module loads (as long/_fused.c does);
 * -DATTNCLI_NO_CLONES builds the baseline alone (the test of the default clone's numerics). */
#define VECTOR_CLONES __attribute__((target_clones("default", "arch=x86-64-v3", "arch=x86-64-v4")))
#else
#define VECTOR_CLONES
#endif

#define QK_K 256
typedef void (*block_fn)(const uint8_t *x, float *y, int64_t n);  /* n blocks */

#include "_half.h"  /* from_bits, to_bits, half_bits, f16: shared with _qmatmul.c */

static const int8_t KVALUES[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                   1,    13,   25,  38,  53,  69,  89,  113};

VECTOR_CLONES static void rows_f32(const uint8_t *x, float *y, int64_t n) { memcpy(y, x, n * 4); }

VECTOR_CLONES static void rows_f16(const uint8_t *x, float *y, int64_t n) {
    uint16_t h[256];  /* the halves a chunk at a time, as 16-bit lanes gcc vectorises */
    for (int64_t i = 0; i < n; i += 256) {
        int64_t m = n - i < 256 ? n - i : 256;
        memcpy(h, x + 2 * i, 2 * m);
        for (int64_t k = 0; k < m; k++) y[i + k] = half_bits(h[k]);
    }
}

VECTOR_CLONES static void rows_bf16(const uint8_t *x, float *y, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = from_bits(((uint32_t)x[2 * i] << 16) |
                                                     ((uint32_t)x[2 * i + 1] << 24));
}

VECTOR_CLONES static void blocks_q8_0(const uint8_t *x, float *y, int64_t n) {
    for (int64_t b = 0; b < n; b++, x += 34, y += 32) {
        float d = f16(x);
        for (int l = 0; l < 32; l++) y[l] = (float)(int8_t)x[2 + l] * d;
    }
}

VECTOR_CLONES static void blocks_q4_0(const uint8_t *x, float *y, int64_t n) {
    for (int64_t b = 0; b < n; b++, x += 18, y += 32) {
        float d = f16(x);
        const uint8_t *q = x + 2;
        for (int l = 0; l < 16; l++) {
            y[l] = d * (float)((int)(q[l] & 0xF) - 8);
            y[l + 16] = d * (float)((int)(q[l] >> 4) - 8);
        }
    }
}

VECTOR_CLONES static void blocks_q4_1(const uint8_t *x, float *y, int64_t n) {
    for (int64_t b = 0; b < n; b++, x += 20, y += 32) {
        float d = f16(x), m = f16(x + 2);
        const uint8_t *q = x + 4;
        for (int l = 0; l < 16; l++) {
            y[l] = d * (float)(q[l] & 0xF) + m;
            y[l + 16] = d * (float)(q[l] >> 4) + m;
        }
    }
}

static inline uint32_t u32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

VECTOR_CLONES static void blocks_q5_0(const uint8_t *x, float *y, int64_t n) {
    for (int64_t b = 0; b < n; b++, x += 22, y += 32) {
        float d = f16(x);
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

VECTOR_CLONES static void blocks_q5_1(const uint8_t *x, float *y, int64_t n) {
    for (int64_t b = 0; b < n; b++, x += 24, y += 32) {
        float d = f16(x), m = f16(x + 2);
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

VECTOR_CLONES static void blocks_iq4_nl(const uint8_t *x, float *y, int64_t n) {
    for (int64_t b = 0; b < n; b++, x += 18, y += 32) {
        float d = f16(x);
        const uint8_t *q = x + 2;
        for (int l = 0; l < 16; l++) {
            y[l] = d * (float)KVALUES[q[l] & 0xF];
            y[l + 16] = d * (float)KVALUES[q[l] >> 4];
        }
    }
}

/* Q2_K: scales[16] (low nibble scale, high nibble min), qs[64], d, dmin; 16 groups of 16. */
VECTOR_CLONES static void blocks_q2_k(const uint8_t *x, float *y, int64_t n) {
    for (int64_t b = 0; b < n; b++, x += 84, y += QK_K) {
        float d = f16(x + 80), dmin = f16(x + 82), dl[16], ml[16];
        for (int s = 0; s < 16; s++) {
            dl[s] = d * (float)(x[s] & 0xF);
            ml[s] = dmin * (float)(x[s] >> 4);
        }
        const uint8_t *qs = x + 16;
        for (int g = 0; g < 8; g++)  /* 32 values: half g / 4, bits 2·(g % 4) of qs[32·half..] */
            for (int l = 0; l < 32; l++) {
                int s = 2 * g + l / 16, q = (qs[(g >> 2) * 32 + l] >> (2 * (g & 3))) & 3;
                y[32 * g + l] = dl[s] * (float)q - ml[s];
            }
    }
}

/* Q3_K: hmask[32], qs[64], scales[12] (16 six-bit scales, offset 32), d. */
VECTOR_CLONES static void blocks_q3_k(const uint8_t *x, float *y, int64_t n) {
    for (int64_t b = 0; b < n; b++, x += 110, y += QK_K) {
        const uint8_t *hmask = x, *qs = x + 32, *sc = x + 96;
        float d = f16(x + 108), dl[16];
        for (int s = 0; s < 16; s++) {
            int lo = s < 8 ? sc[s] & 0xF : sc[s - 8] >> 4;
            int hi = (sc[8 + (s & 3)] >> (2 * (s >> 2))) & 3;
            dl[s] = d * (float)((lo | hi << 4) - 32);
        }
        for (int g = 0; g < 8; g++)  /* as Q2_K's values, with mask bit g of hmask[l] */
            for (int l = 0; l < 32; l++) {
                int low = (qs[(g >> 2) * 32 + l] >> (2 * (g & 3))) & 3;
                int high = ((hmask[l] >> g) & 1) ^ 1;  /* offset 4 where the bit is 0 */
                y[32 * g + l] = dl[2 * g + l / 16] * (float)(low - (high << 2));
            }
    }
}

/* Q4_K and Q5_K's 8 six-bit scales and mins, packed in 12 bytes. */
static inline void scale_min_k(const uint8_t *sc, float d, float dmin, float *dl, float *ml) {
    for (int j = 0; j < 4; j++) {
        dl[j] = d * (float)(sc[j] & 0x3F);
        ml[j] = dmin * (float)(sc[4 + j] & 0x3F);
        dl[4 + j] = d * (float)((sc[8 + j] & 0xF) | ((sc[j] >> 2) & 0x30));
        ml[4 + j] = dmin * (float)((sc[8 + j] >> 4) | ((sc[4 + j] >> 2) & 0x30));
    }
}

/* Q4_K: d, dmin, scales[12], qs[128]; 8 groups of 32, group 2c + k in nibble k of qs[32c..]. */
VECTOR_CLONES static void blocks_q4_k(const uint8_t *x, float *y, int64_t n) {
    for (int64_t b = 0; b < n; b++, x += 144, y += QK_K) {
        float dl[8], ml[8];
        scale_min_k(x + 4, f16(x), f16(x + 2), dl, ml);
        const uint8_t *qs = x + 16;
        for (int g = 0; g < 8; g++)
            for (int l = 0; l < 32; l++) {
                int q = (qs[(g >> 1) * 32 + l] >> (4 * (g & 1))) & 0xF;
                y[32 * g + l] = dl[g] * (float)q - ml[g];
            }
    }
}

/* Q5_K: Q4_K's fields with qh[32] before qs; group g's fifth bits are bit g of qh[l]. */
VECTOR_CLONES static void blocks_q5_k(const uint8_t *x, float *y, int64_t n) {
    for (int64_t b = 0; b < n; b++, x += 176, y += QK_K) {
        float dl[8], ml[8];
        scale_min_k(x + 4, f16(x), f16(x + 2), dl, ml);
        const uint8_t *qh = x + 16, *qs = x + 48;
        for (int g = 0; g < 8; g++)
            for (int l = 0; l < 32; l++) {
                int q = ((qs[(g >> 1) * 32 + l] >> (4 * (g & 1))) & 0xF) | (((qh[l] >> g) & 1) << 4);
                y[32 * g + l] = dl[g] * (float)q - ml[g];
            }
    }
}

/* Q6_K: ql[128], qh[64], scales[16] (int8), d; 16 groups of 16, values offset by 32. Each
 * half of 128 values takes its low 4 bits from 64 bytes of ql (low, then high nibbles) and its
 * high 2 from 32 bytes of qh (bits 0-1, 2-3, 4-5, 6-7 for its four runs of 32): each run of
 * 16 values one scale, in loops over contiguous bytes that vectorise. */
VECTOR_CLONES static void blocks_q6_k(const uint8_t *x, float *y, int64_t n) {
    for (int64_t b = 0; b < n; b++, x += 210, y += QK_K) {
        float d = f16(x + 208), dl[16];
        for (int s = 0; s < 16; s++) dl[s] = d * (float)(int8_t)x[192 + s];
        for (int h = 0; h < 2; h++) {
            const uint8_t *ql = x + 64 * h, *qh = x + 128 + 32 * h;
            float *out = y + 128 * h;
            const float *sc = dl + 8 * h;
            for (int half = 0; half < 2; half++)  /* l in 0-15, then 16-31: one scale each */
                for (int l = 16 * half; l < 16 * half + 16; l++) {
                    int q1 = (ql[l] & 0xF) | ((qh[l] & 3) << 4);
                    int q2 = (ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4);
                    int q3 = (ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4);
                    int q4 = (ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4);
                    out[l] = sc[half] * (float)(q1 - 32);
                    out[l + 32] = sc[2 + half] * (float)(q2 - 32);
                    out[l + 64] = sc[4 + half] * (float)(q3 - 32);
                    out[l + 96] = sc[6 + half] * (float)(q4 - 32);
                }
        }
    }
}

/* IQ4_XS: d, scales_h (uint16), scales_l[4], qs[128]; 8 groups of 32 on IQ4_NL's grid. */
VECTOR_CLONES static void blocks_iq4_xs(const uint8_t *x, float *y, int64_t n) {
    for (int64_t b = 0; b < n; b++, x += 136, y += QK_K) {
        float d = f16(x);
        uint32_t high = (uint32_t)x[2] | (uint32_t)x[3] << 8;
        const uint8_t *low = x + 4, *qs = x + 8;
        for (int s = 0; s < 8; s++) {
            int scale = ((low[s >> 1] >> (4 * (s & 1))) & 0xF) | (int)(((high >> (2 * s)) & 3) << 4);
            float dl = d * (float)(scale - 32);
            for (int l = 0; l < 16; l++) {
                y[s * 32 + l] = dl * (float)KVALUES[qs[s * 16 + l] & 0xF];
                y[s * 32 + 16 + l] = dl * (float)KVALUES[qs[s * 16 + l] >> 4];
            }
        }
    }
}

/* GGMLQuantizationType's numbers, with each type's values per block and bytes per block. */
typedef struct { int qtype, block, bytes; block_fn fn; } layout;
static const layout LAYOUTS[] = {
    {0, 1, 4, rows_f32},        {1, 1, 2, rows_f16},        {2, 32, 18, blocks_q4_0},
    {3, 32, 20, blocks_q4_1},   {6, 32, 22, blocks_q5_0},   {7, 32, 24, blocks_q5_1},
    {8, 32, 34, blocks_q8_0},   {10, 256, 84, blocks_q2_k}, {11, 256, 110, blocks_q3_k},
    {12, 256, 144, blocks_q4_k}, {13, 256, 176, blocks_q5_k}, {14, 256, 210, blocks_q6_k},
    {20, 32, 18, blocks_iq4_nl}, {23, 256, 136, blocks_iq4_xs}, {30, 1, 2, rows_bf16},
};

static const layout *find(int qtype) {
    for (size_t i = 0; i < sizeof LAYOUTS / sizeof *LAYOUTS; i++)
        if (LAYOUTS[i].qtype == qtype) return &LAYOUTS[i];
    return NULL;
}

static PyObject *layouts(PyObject *Py_UNUSED(self), PyObject *Py_UNUSED(args)) {
    PyObject *out = PyDict_New();
    for (size_t i = 0; out && i < sizeof LAYOUTS / sizeof *LAYOUTS; i++) {
        PyObject *key = PyLong_FromLong(LAYOUTS[i].qtype);
        PyObject *value = Py_BuildValue("(ii)", LAYOUTS[i].block, LAYOUTS[i].bytes);
        if (!key || !value || PyDict_SetItem(out, key, value) < 0) Py_CLEAR(out);
        Py_XDECREF(key);
        Py_XDECREF(value);
    }
    return out;
}

static PyObject *dequantize(PyObject *Py_UNUSED(self), PyObject *args) {
    int qtype;
    Py_buffer src, dst;
    if (!PyArg_ParseTuple(args, "iy*w*", &qtype, &src, &dst)) return NULL;
    const layout *t = find(qtype);
    PyObject *result = NULL;
    if (!t) {
        PyErr_Format(PyExc_ValueError, "no dequantizer for GGML type %d", qtype);
    } else if (src.len % t->bytes || dst.len != src.len / t->bytes * t->block * 4) {
        PyErr_Format(PyExc_ValueError, "%zd bytes of GGML type %d are not whole blocks, or not "
                     "the %zd bytes of float32 given", src.len, qtype, dst.len);
    } else {
        int64_t n = src.len / t->bytes;
        Py_BEGIN_ALLOW_THREADS
        t->fn((const uint8_t *)src.buf, (float *)dst.buf, n);
        Py_END_ALLOW_THREADS
        result = Py_NewRef(Py_None);
    }
    PyBuffer_Release(&src);
    PyBuffer_Release(&dst);
    return result;
}

static PyMethodDef methods[] = {
    {"dequantize", dequantize, METH_VARARGS,
     "dequantize(qtype, blocks, out): whole blocks of bytes into float32 out, GIL released."},
    {"layouts", layouts, METH_NOARGS, "{GGML type number: (values, bytes) per block}."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "attncli.models.sources.gguf._dequant",
    "GGUF blocks to float32, as the gguf package computes them (see gguf/dequant.py).", -1,
    methods,
};

PyMODINIT_FUNC PyInit__dequant(void) { return PyModule_Create(&module); }
