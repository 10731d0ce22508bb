/* The tiled pass's passes over one tile of scores, fused: the matrix products stay torch's.
 *
 * A key tile's scores (rows × width, row-major, s - m in log2 units) are read twice instead of
 * five to eight times by torch operations:
 *   fold_scores: the causal mask, each row's largest score, and the running top-k keys;
 *   exp_stats:   p = 2^(s - shift), Σ p·(s - shift) for the entropy and Σ p·j for the mean key.
 * Every function releases the GIL, so the tiled pass's worker threads run them side by side.
 * Pointers come in as integers (tensor.data_ptr()); long/fused.py checks shapes, dtypes and
 * contiguity before it calls in. Built by setuptools as an optional extension: without a C
 * compiler the package installs without it and the tiled pass uses torch operations alone.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#define LANES 16               /* one AVX-512 register of float32; two AVX2 ones */
#define MASKED (-1e30f)        /* a masked score, as long/tiled.py writes it */
#define MASKED_BELOW (-1e29f)  /* at or below: masked */

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
/* One build runs on any x86-64 CPU and picks the widest vectors it has when loaded. */
#define VECTOR_CLONES __attribute__((target_clones("default", "arch=x86-64-v3", "arch=x86-64-v4")))
#else
#define VECTOR_CLONES
#endif

/* 2^x in float32, branch-free so loops over it vectorise: 2^x = 2^n · 2^f with n = round(x),
 * f in [-1/2, 1/2], and 2^f from its Taylor series to degree 7 (truncation error 5e-9 relative,
 * below float32's rounding); 2^n as two factors, so that n = 128 and n = -126 both stay in
 * range. x below -126 gives 0, as the workers flush denormals to zero; x of 128 or more gives
 * +inf; NaN stays NaN. */
static inline __attribute__((always_inline)) float exp2_f32(float x) {
    x = x < -127.0f ? -127.0f : x;
    x = x > 128.0f ? 128.0f : x;
    const float shifter = 12582912.0f; /* 1.5 · 2^23: adding it rounds to an integer */
    float t = x + shifter;
    float n = t - shifter;
    float f = x - n;
    int32_t bits;
    memcpy(&bits, &t, sizeof bits);
    int32_t whole = bits - 0x4B400000;  /* n as an integer, -127..128 */
    int32_t half = whole >> 1;          /* 2^n = 2^half · 2^(n - half): each factor normal */
    uint32_t low_bits = (uint32_t)(half + 127) << 23;
    uint32_t high_bits = (uint32_t)(whole - half + 127) << 23;
    float low, high;
    memcpy(&low, &low_bits, sizeof low);
    memcpy(&high, &high_bits, sizeof high);
    float poly = 1.5252733804059840e-05f;
    poly = poly * f + 1.5403530393381606e-04f;
    poly = poly * f + 1.3333558146428443e-03f;
    poly = poly * f + 9.6181291076284772e-03f;
    poly = poly * f + 5.5504108664821580e-02f;
    poly = poly * f + 2.4022650695910071e-01f;
    poly = poly * f + 6.9314718055994531e-01f;
    poly = poly * f + 1.0f;
    return x < -126.0f ? 0.0f : poly * low * high;
}

/* Each row's largest score (masked: MASKED_BELOW or below), over LANES lanes then across. */
VECTOR_CLONES
static float row_max(const float *s, int64_t width) {
    float lane[LANES];
    for (int l = 0; l < LANES; l++) lane[l] = -INFINITY;
    int64_t j = 0;
    for (; j + LANES <= width; j += LANES)
        for (int l = 0; l < LANES; l++) lane[l] = s[j + l] > lane[l] ? s[j + l] : lane[l];
    float best = -INFINITY;
    for (int l = 0; l < LANES; l++) best = lane[l] > best ? lane[l] : best;
    for (; j < width; j++) best = s[j] > best ? s[j] : best;
    return best;
}

/* Insert (value, index) into a row's top-k, kept heaviest first; among equal values the
 * earlier key stays ahead. The caller has checked value > the k-th value. */
static void top_insert(float *val, int64_t *idx, int64_t k, float value, int64_t index) {
    int64_t at = k - 1;
    while (at > 0 && val[at - 1] < value) {
        val[at] = val[at - 1];
        idx[at] = idx[at - 1];
        at--;
    }
    val[at] = value;
    idx[at] = index;
}

/* fold_scores(scores, rows, width, k0, block_q, q0, row_max, tile_max, top_val, top_idx, k,
 *             row_block, blocks, pool)
 *
 * scores (rows × width): s - m of rows = heads · block_q query rows against keys k0.. .
 * q0 ≥ 0: causal, row r is query q0 + r % block_q, and keys after it are set to MASKED.
 * tile_max (rows): written, each row's largest s - m in this tile.
 * top_val, top_idx (rows × k), if k > 0: each row's best scores so far in absolute log2 units
 * (s - m + row_max[r]) and their key indices (-1: none yet), updated with this tile's keys.
 * row_block (rows × blocks), if pool > 0: each row's largest absolute score in each block of
 * pool keys, raised to this tile's where larger. */
VECTOR_CLONES
static void fold_scores_impl(float *scores, int64_t rows, int64_t width, int64_t k0,
                             int64_t block_q, int64_t q0, const float *m, float *tile_max,
                             float *top_val, int64_t *top_idx, int64_t k, float *row_block,
                             int64_t blocks, int64_t pool) {
    for (int64_t r = 0; r < rows; r++) {
        float *s = scores + r * width;
        if (q0 >= 0) {
            int64_t first_future = q0 + r % block_q + 1 - k0; /* first masked column */
            for (int64_t j = first_future < 0 ? 0 : first_future; j < width; j++) s[j] = MASKED;
        }
        float best;
        if (pool > 0) { /* the row's maximum is the largest of its blocks' */
            float *block = row_block + r * blocks;
            best = -INFINITY;
            for (int64_t lo = 0; lo < width;) {
                int64_t b = (k0 + lo) / pool;
                int64_t hi = (b + 1) * pool - k0;
                hi = hi < width ? hi : width;
                float top = row_max(s + lo, hi - lo);
                best = top > best ? top : best;
                float raised = top + m[r];
                block[b] = raised > block[b] ? raised : block[b];
                lo = hi;
            }
        } else {
            best = row_max(s, width);
        }
        tile_max[r] = best;
        if (k <= 0) continue;
        float *val = top_val + r * k;
        int64_t *idx = top_idx + r * k;
        float offset = m[r];
        float floor = val[k - 1] - offset; /* beat this (relative) to enter the top-k */
        if (!(best > floor) || !(best > MASKED_BELOW)) continue;
        for (int64_t j = 0; j < width; j++) {
            if (s[j] > floor && s[j] > MASKED_BELOW) {
                top_insert(val, idx, k, s[j] + offset, k0 + j);
                floor = val[k - 1] - offset;
            }
        }
    }
}

/* exp_stats(scores, rows, width, k0, shift, plogp, key_sum, row_sum)
 *
 * For each row r: x = s - shift[r] (shift may be 0: none); the scores are overwritten with the
 * weights 2^x, and plogp[r] += Σ 2^x · x, key_sum[r] += Σ 2^x · (k0 + j), row_sum[r] += Σ 2^x. */
VECTOR_CLONES
static void exp_stats_impl(float *scores, int64_t rows, int64_t width, int64_t k0,
                           const float *shift, float *plogp, float *key_sum, float *row_sum) {
    for (int64_t r = 0; r < rows; r++) {
        float *s = scores + r * width;
        float sh = shift ? shift[r] : 0.0f;
        float lane_plogp[LANES], lane_keys[LANES], lane_sum[LANES];
        for (int l = 0; l < LANES; l++) lane_plogp[l] = lane_keys[l] = lane_sum[l] = 0.0f;
        int64_t j = 0;
        for (; j + LANES <= width; j += LANES) {
            float base = (float)(k0 + j); /* key positions are exact in float32 below 2^24 */
            for (int l = 0; l < LANES; l++) {
                float x = s[j + l] - sh;
                float p = exp2_f32(x);
                s[j + l] = p;
                lane_plogp[l] += p * x;
                lane_keys[l] += p * (base + (float)l);
                lane_sum[l] += p;
            }
        }
        float sum_plogp = 0.0f, sum_keys = 0.0f, sum = 0.0f;
        for (int l = 0; l < LANES; l++) {
            sum_plogp += lane_plogp[l];
            sum_keys += lane_keys[l];
            sum += lane_sum[l];
        }
        for (; j < width; j++) {
            float x = s[j] - sh;
            float p = exp2_f32(x);
            s[j] = p;
            sum_plogp += p * x;
            sum_keys += p * (float)(k0 + j);
            sum += p;
        }
        plogp[r] += sum_plogp;
        key_sum[r] += sum_keys;
        row_sum[r] += sum;
    }
}

static void *as_pointer(unsigned long long address) { return (void *)(uintptr_t)address; }

static PyObject *fold_scores(PyObject *Py_UNUSED(self), PyObject *args) {
    unsigned long long scores, m, tile_max, top_val, top_idx, row_block;
    long long rows, width, k0, block_q, q0, k, blocks, pool;
    if (!PyArg_ParseTuple(args, "KLLLLLKKKKLKLL", &scores, &rows, &width, &k0, &block_q, &q0, &m,
                          &tile_max, &top_val, &top_idx, &k, &row_block, &blocks, &pool))
        return NULL;
    if (rows < 0 || width < 0 || block_q < 1 || k < 0 || k0 < 0 || pool < 0 ||
        (pool > 0 && (k0 + width + pool - 1) / pool > blocks)) {
        PyErr_SetString(PyExc_ValueError, "fold_scores: sizes out of range");
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS
    fold_scores_impl(as_pointer(scores), rows, width, k0, block_q, q0, as_pointer(m),
                     as_pointer(tile_max), as_pointer(top_val), as_pointer(top_idx), k,
                     as_pointer(row_block), blocks, pool);
    Py_END_ALLOW_THREADS
    Py_RETURN_NONE;
}

static PyObject *exp_stats(PyObject *Py_UNUSED(self), PyObject *args) {
    unsigned long long scores, shift, plogp, key_sum, row_sum;
    long long rows, width, k0;
    if (!PyArg_ParseTuple(args, "KLLLKKKK", &scores, &rows, &width, &k0, &shift, &plogp,
                          &key_sum, &row_sum))
        return NULL;
    if (rows < 0 || width < 0) {
        PyErr_SetString(PyExc_ValueError, "exp_stats: negative size");
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS
    exp_stats_impl(as_pointer(scores), rows, width, k0, as_pointer(shift), as_pointer(plogp),
                   as_pointer(key_sum), as_pointer(row_sum));
    Py_END_ALLOW_THREADS
    Py_RETURN_NONE;
}

static PyObject *exp2_array(PyObject *Py_UNUSED(self), PyObject *args) {
    unsigned long long src, dst;
    long long count;
    if (!PyArg_ParseTuple(args, "KKL", &src, &dst, &count)) return NULL;
    const float *x = as_pointer(src);
    float *y = as_pointer(dst);
    Py_BEGIN_ALLOW_THREADS
    for (long long i = 0; i < count; i++) y[i] = exp2_f32(x[i]);
    Py_END_ALLOW_THREADS
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"fold_scores", fold_scores, METH_VARARGS,
     "Mask, row maxima and running top-k of one tile of scores."},
    {"exp_stats", exp_stats, METH_VARARGS,
     "Weights 2^(s - shift) of one tile, with the entropy's and mean key's row sums."},
    {"exp2_array", exp2_array, METH_VARARGS, "2^x elementwise, as exp_stats takes it (tests)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "attncli.long._fused",
    "The tiled pass's score passes, fused in C (see long/fused.py).", -1, methods,
};

PyMODINIT_FUNC PyInit__fused(void) { return PyModule_Create(&module); }
