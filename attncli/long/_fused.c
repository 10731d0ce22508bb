/* The tiled pass's passes over one tile of scores, fused: the matrix products stay torch's.
 *
 * A key tile's scores (rows × width, row-major, s - m in log2 units) are read twice instead of
 * five to eight times by torch operations:
 *   fold_scores: the causal mask, each row's largest score, and the running top-k keys;
 *   exp_stats:   p = 2^(s - shift), Σ p·(s - shift) for the entropy and Σ p·j for the mean key.
 * Every function releases the GIL, so the tiled pass's worker threads run them side by side.
 * Pointers come in as integers (tensor.data_ptr()); long/fused.py checks dtypes, sizes and
 * contiguity before it calls in. Built by setuptools as an optional extension: without a C
 * compiler, or where this file refuses to build (below), the package installs without it and
 * the tiled pass uses torch operations alone.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

/* exp2_f32 rounds with float32 arithmetic done as written: -ffast-math would fold its rounding
 * away, and x87's wider intermediates would change it. Refusing to build keeps the fallback. */
#if defined(__FAST_MATH__) || (defined(FLT_EVAL_METHOD) && FLT_EVAL_METHOD != 0)
#error "attncli's C passes need strict float32 arithmetic (no -ffast-math, no x87)"
#endif

#if defined(__GNUC__)
#define ALWAYS_INLINE inline __attribute__((always_inline))
#else
#define ALWAYS_INLINE inline
#endif

#define LANES 16               /* one AVX-512 register of float32; two AVX2 ones */
#define MASKED (-1e30f)        /* a masked score, as long/tiled.py writes it */
#define MASKED_BELOW (-1e29f)  /* at or below: masked */

#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 12 && defined(__x86_64__) && \
    defined(__GLIBC__)
/* One build runs on any x86-64 CPU and picks the widest vectors it has when loaded (an ifunc:
 * glibc; the arch= names and their dispatch: gcc 12). Elsewhere: the compiler's defaults. */
#define VECTOR_CLONES __attribute__((target_clones("default", "arch=x86-64-v3", "arch=x86-64-v4")))
#else
#define VECTOR_CLONES
#endif
#if defined(__GNUC__) && defined(__x86_64__)
#define X86_DISPATCH 1 /* skip_below's vector versions, chosen when the module loads */
#include <immintrin.h>
#endif

/* The first index from j on of a group of keys holding a score above floor; in the scalar
 * version the key itself, in the vector ones the group's first key (or the start of a tail
 * shorter than a group). A row's top-k walks only the groups this finds. */
typedef int64_t (*skip_fn)(const float *s, int64_t j, int64_t width, float floor);

static int64_t skip_below_scalar(const float *s, int64_t j, int64_t width, float floor) {
    while (j < width && !(s[j] > floor)) j++;
    return j;
}

#ifdef X86_DISPATCH
__attribute__((target("avx2"))) static int64_t skip_below_avx2(const float *s, int64_t j,
                                                               int64_t width, float floor) {
    __m256 bar = _mm256_set1_ps(floor);
    for (; j + 8 <= width; j += 8)
        if (_mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(s + j), bar, _CMP_GT_OQ))) return j;
    return j;
}

__attribute__((target("avx512f"))) static int64_t skip_below_avx512(const float *s, int64_t j,
                                                                    int64_t width, float floor) {
    __m512 bar = _mm512_set1_ps(floor);
    for (; j + 16 <= width; j += 16)
        if (_mm512_cmp_ps_mask(_mm512_loadu_ps(s + j), bar, _CMP_GT_OQ)) return j;
    return j;
}
#endif

static skip_fn skip_below = skip_below_scalar; /* set once when the module loads */

/* 2^x in float32, branch-free so loops over it vectorise: 2^x = 2^n · 2^f with n = round(x),
 * f in [-1/2, 1/2], and 2^f from its Taylor series to degree 7 (truncation error 5e-9 relative,
 * below float32's rounding); 2^n as two factors, so that n = 128 and n = -126 both stay in
 * range. x below -126 gives 0, as the workers flush denormals to zero; x of 128 or more gives
 * +inf; NaN stays NaN. */
static ALWAYS_INLINE float exp2_f32(float x) {
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

/* A row's largest score (masked: MASKED_BELOW or below), over LANES lanes then across; with
 * lanes, also each lane's maximum: lane l holds keys l, l + LANES, ... (the tail's too). */
VECTOR_CLONES
static float row_max(const float *s, int64_t width, float *lanes) {
    float lane[LANES];
    for (int l = 0; l < LANES; l++) lane[l] = -INFINITY;
    int64_t j = 0;
    for (; j + LANES <= width; j += LANES)
        for (int l = 0; l < LANES; l++) lane[l] = s[j + l] > lane[l] ? s[j + l] : lane[l];
    for (int l = 0; j < width; j++, l++) lane[l] = s[j] > lane[l] ? s[j] : lane[l];
    float best = -INFINITY;
    for (int l = 0; l < LANES; l++) best = lane[l] > best ? lane[l] : best;
    if (lanes) memcpy(lanes, lane, sizeof lane);
    return best;
}

/* The k-th largest of the maxima of LANES disjoint groups of a row's keys (k ≤ LANES): the j-th
 * best key is at least the j-th largest group maximum, so every key of the row that can enter a
 * top-k of k is at least this. */
static float kth_lane(const float *lanes, int64_t k) {
    float top[LANES];
    memcpy(top, lanes, sizeof top);
    for (int64_t c = 0; c < k; c++) { /* selection: top[c] becomes the (c+1)-th largest */
        int64_t at = c;
        for (int64_t l = c + 1; l < LANES; l++) at = top[l] > top[at] ? l : at;
        float swap = top[c];
        top[c] = top[at];
        top[at] = swap;
    }
    return top[k - 1];
}

/* Put (value, index) into slots 0..last of a list kept heaviest first, moving the lighter ones
 * down over slot last; among equal values the one already there stays ahead. The running top-k
 * inserts with last = k - 1 (having checked value beats the k-th); rescore's insertion sort
 * with last = the slot being sorted in. */
static ALWAYS_INLINE void insert_sorted(float *val, int64_t *idx, int64_t last, float value,
                                        int64_t index) {
    int64_t at = last;
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
        /* lanes: the maxima of LANES disjoint groups of the row's keys, for the top-k below */
        float best, lanes[LANES];
        if (pool > 0) { /* the row's maximum is the largest of its blocks' */
            float *block = row_block + r * blocks;
            float part[LANES];
            best = -INFINITY;
            for (int l = 0; l < LANES; l++) lanes[l] = -INFINITY;
            for (int64_t lo = 0; lo < width;) {
                int64_t b = (k0 + lo) / pool;
                int64_t hi = (b + 1) * pool - k0;
                hi = hi < width ? hi : width;
                float top = row_max(s + lo, hi - lo, part);
                for (int l = 0; l < LANES; l++) lanes[l] = part[l] > lanes[l] ? part[l] : lanes[l];
                best = top > best ? top : best;
                float raised = top + m[r];
                block[b] = raised > block[b] ? raised : block[b];
                lo = hi;
            }
        } else {
            best = row_max(s, width, lanes);
        }
        tile_max[r] = best;
        if (k <= 0) continue;
        float *val = top_val + r * k;
        int64_t *idx = top_idx + r * k;
        float offset = m[r];
        float floor = val[k - 1] - offset; /* beat this (relative) to enter the top-k */
        if (!(best > floor) || !(best > MASKED_BELOW)) continue;
        float least = -INFINITY;
        if (k <= LANES) {
            /* Raise the bar to a little under the k-th lane maximum: a key at it may still
             * enter, and the many keys below it, which would enter and be pushed out again
             * while the top-k fills (about k·ln(width/k) of them in a row's first tile), never
             * do. "A little" is at least FLT_MIN: the workers treat denormals as zero. */
            float kth = kth_lane(lanes, k);
            least = kth - (fabsf(kth) * 9.5367431640625e-07f + FLT_MIN); /* 2^-20 */
            floor = least > floor ? least : floor;
        }
        /* Most tiles hold some key that enters a row's top-k (for keys in random order, a tile
         * after t others does with chance ~1 - e^(-k/t)), but few groups of keys do. */
        for (int64_t j = 0; j < width;) {
            j = skip_below(s, j, width, floor);
            int64_t end = j + LANES < width ? j + LANES : width;
            for (; j < end; j++) {
                if (s[j] > floor && s[j] > MASKED_BELOW) {
                    insert_sorted(val, idx, k - 1, s[j] + offset, k0 + j);
                    floor = val[k - 1] - offset;
                    floor = least > floor ? least : floor;
                }
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

/* rescore(q, keys, idx, best): for each of rows = heads · block_q query rows, its k keys idx
 * (-1: none) scored again as q·k in float32, best (rows × k), then both sorted heaviest first
 * (empty slots, -inf, last; among equal scores the earlier slot first). q is contiguous
 * (rows × dim); keys is (heads, N, dim) with strides in elements. */
static void rescore_impl(const float *q, const float *keys, int64_t stride_h, int64_t stride_n,
                         int64_t stride_d, int64_t block_q, int64_t dim, int64_t *idx,
                         float *best, int64_t rows, int64_t k) {
    for (int64_t r = 0; r < rows; r++) {
        const float *query = q + r * dim;
        const float *head_keys = keys + (r / block_q) * stride_h;
        int64_t *slot_idx = idx + r * k;
        float *slot = best + r * k;
        for (int64_t c = 0; c < k; c++) {
            if (slot_idx[c] < 0) {
                slot[c] = -INFINITY;
                continue;
            }
            const float *key = head_keys + slot_idx[c] * stride_n;
            float part[4] = {0.0f, 0.0f, 0.0f, 0.0f};
            int64_t d = 0;
            for (; d + 4 <= dim; d += 4)
                for (int l = 0; l < 4; l++) part[l] += query[d + l] * key[(d + l) * stride_d];
            for (; d < dim; d++) part[0] += query[d] * key[d * stride_d];
            slot[c] = (part[0] + part[1]) + (part[2] + part[3]);
        }
        for (int64_t c = 1; c < k; c++) /* insertion sort: stable, k is small */
            insert_sorted(slot, slot_idx, c, slot[c], slot_idx[c]);
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

static PyObject *rescore(PyObject *Py_UNUSED(self), PyObject *args) {
    unsigned long long q, keys, idx, best;
    long long stride_h, stride_n, stride_d, block_q, dim, rows, k;
    if (!PyArg_ParseTuple(args, "KKLLLLLKKLL", &q, &keys, &stride_h, &stride_n, &stride_d,
                          &block_q, &dim, &idx, &best, &rows, &k))
        return NULL;
    if (rows < 0 || k < 0 || dim < 0 || block_q < 1) {
        PyErr_SetString(PyExc_ValueError, "rescore: sizes out of range");
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS
    rescore_impl(as_pointer(q), as_pointer(keys), stride_h, stride_n, stride_d, block_q, dim,
                 as_pointer(idx), as_pointer(best), rows, k);
    Py_END_ALLOW_THREADS
    Py_RETURN_NONE;
}

/* use_skip(level): 0 scalar, 1 AVX2, 2 AVX-512, -1 the widest this CPU has; returns the level
 * in use. The tests run the top-k with each version the CPU can run. */
static int choose_skip(int level) {
    int best = 0;
#ifdef X86_DISPATCH
    __builtin_cpu_init();
    best = __builtin_cpu_supports("avx512f") ? 2 : __builtin_cpu_supports("avx2") ? 1 : 0;
#endif
    if (level < 0 || level > best) level = best;
    skip_below = skip_below_scalar;
#ifdef X86_DISPATCH
    if (level == 2) skip_below = skip_below_avx512;
    if (level == 1) skip_below = skip_below_avx2;
#endif
    return level;
}

static PyObject *use_skip(PyObject *Py_UNUSED(self), PyObject *args) {
    int level;
    if (!PyArg_ParseTuple(args, "i", &level)) return NULL;
    return PyLong_FromLong(choose_skip(level));
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
    {"rescore", rescore, METH_VARARGS,
     "Each row's top-k keys scored again from q·k and sorted heaviest first."},
    {"exp2_array", exp2_array, METH_VARARGS, "2^x elementwise, as exp_stats takes it (tests)."},
    {"use_skip", use_skip, METH_VARARGS, "Choose the top-k's group scan (tests); -1: the best."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "attncli.long._fused",
    "The tiled pass's score passes, fused in C (see long/fused.py).", -1, methods,
};

PyMODINIT_FUNC PyInit__fused(void) {
    choose_skip(-1);
    return PyModule_Create(&module);
}
