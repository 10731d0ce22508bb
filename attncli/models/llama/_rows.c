/* A decode step's RMSNorm and RoPE on float32 rows, one call each, with torch's bits.
 *
 * torch's rms_norm on the CPU is seven operations (pow, a sum, div_, add_, rsqrt and two
 * products), about 35-50 µs a call between a decode step's matrix products (their weights push
 * torch's code out of the caches), where one pass over a row of 576 values takes about a
 * microsecond; RoPE's turn of a step's row is four.
 *
 * rms_norm(x, scale, out, rows, d, eps, lanes): each row of x (rows, d) as torch computes
 * rms_norm in float32: v = Σ fl(x²) / d, r = 1 / sqrt(v + eps), out = fl(fl(x · r) · scale),
 * each operation rounded to float32 (-ffp-contract=off), and the sum in torch's own order for a
 * contiguous row on `lanes`-wide vectors (torch_sum below). Pointers come in as integers
 * (tensor.data_ptr()); block.py's rms_norm checks dtypes, sizes and contiguity before it calls
 * in, and takes this only where it gives F.rms_norm's bits on this torch build.
 *
 * rope_turn(x, cos, sin, out, n, hd): RopeRow.turn's x·cos + roll(x, hd/2)·sin in one call, not
 * three torch operations and a roll, the same products and sum rounded the same.
 *
 * Built by setuptools as an optional extension: without it, or with ATTNCLI_FUSED=0, torch's
 * operations.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <float.h>
#include <math.h>
#include <stdint.h>

#if defined(__FAST_MATH__) || (defined(FLT_EVAL_METHOD) && FLT_EVAL_METHOD != 0)
#error "attncli's RMSNorm needs strict float32 arithmetic (no -ffast-math, no x87)"
#endif

#define MAX_LANES 16
#define ILP 4    /* row_sum's interleaved partial sums */
#define LEVELS 4 /* multi_row_sum's cascade */

static int64_t ceil_log2(int64_t x) { /* ATen's utils::CeilLog2 */
    if (x <= 2) return 1;
    int64_t bits = 0;
    for (uint64_t v = (uint64_t)x - 1; v; v >>= 1) bits++;
    return bits;
}

/* Σ fl(x_k²) over d >= lanes values, added as ATen's SumKernel.cpp adds a contiguous row
 * (vectorized_inner_sum): vectors of `lanes` values, vector 4i + k into partial k of a
 * cascade of LEVELS levels of 2^level_power steps (multi_row_sum), the vectors past the last
 * four onto partial 0, partials 1..3 onto partial 0 (row_sum); then the values past the last
 * vector onto 0, and the lanes onto that, in order. */
static float torch_sum(const float *x, int64_t d, int lanes) {
    const int64_t vectors = d / lanes, steps = vectors / ILP;
    const int64_t power = ceil_log2(steps) / LEVELS > 4 ? ceil_log2(steps) / LEVELS : 4;
    const int64_t step = (int64_t)1 << power, mask = step - 1;
    float acc[LEVELS][ILP][MAX_LANES] = {{{0}}};
    int64_t i = 0;
    for (; i + step <= steps;) {
        for (int64_t j = 0; j < step; j++, i++)
            for (int k = 0; k < ILP; k++)
                for (int l = 0; l < lanes; l++) {
                    const float v = x[(i * ILP + k) * lanes + l];
                    acc[0][k][l] += v * v;
                }
        for (int j = 1; j < LEVELS; j++) {
            for (int k = 0; k < ILP; k++)
                for (int l = 0; l < lanes; l++) {
                    acc[j][k][l] += acc[j - 1][k][l];
                    acc[j - 1][k][l] = 0.0f;
                }
            if (i & (mask << (j * power))) break;
        }
    }
    for (; i < steps; i++)
        for (int k = 0; k < ILP; k++)
            for (int l = 0; l < lanes; l++) {
                const float v = x[(i * ILP + k) * lanes + l];
                acc[0][k][l] += v * v;
            }
    for (int j = 1; j < LEVELS; j++)
        for (int k = 0; k < ILP; k++)
            for (int l = 0; l < lanes; l++) acc[0][k][l] += acc[j][k][l];
    for (int64_t v = steps * ILP; v < vectors; v++)
        for (int l = 0; l < lanes; l++) {
            const float s = x[v * lanes + l];
            acc[0][0][l] += s * s;
        }
    for (int k = 1; k < ILP; k++)
        for (int l = 0; l < lanes; l++) acc[0][0][l] += acc[0][k][l];
    float sum = 0.0f;
    for (int64_t e = vectors * lanes; e < d; e++) sum += x[e] * x[e];
    for (int l = 0; l < lanes; l++) sum += acc[0][0][l];
    return sum;
}

static void rows_rms_norm(const float *x, const float *scale, float *out, int64_t rows,
                          int64_t d, float eps, int lanes) {
    for (int64_t i = 0; i < rows; i++, x += d, out += d) {
        const float v = torch_sum(x, d, lanes) / (float)d + eps;
        const float r = 1.0f / sqrtf(v);
        for (int64_t k = 0; k < d; k++) out[k] = (x[k] * r) * scale[k];
    }
}

/* RopeRow.turn on n heads of hd values: x·cos + roll(x, hd/2)·sin, sin signed as the row holds
 * it, each product and the sum rounded to float32 as torch's three operations round them. */
static void rows_turn(const float *x, const float *cos, const float *sin, float *out, int64_t n,
                      int64_t hd) {
    const int64_t half = hd / 2;
    for (int64_t j = 0; j < n; j++, x += hd, out += hd) {
        for (int64_t i = 0; i < half; i++) out[i] = x[i] * cos[i] + x[i + half] * sin[i];
        for (int64_t i = half; i < hd; i++) out[i] = x[i] * cos[i] + x[i - half] * sin[i];
    }
}

static PyObject *rope_turn(PyObject *Py_UNUSED(self), PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 6) {
        PyErr_SetString(PyExc_TypeError, "rope_turn(x, cos, sin, out, n, hd) takes 6 arguments");
        return NULL;
    }
    uintptr_t x = PyLong_AsUnsignedLongLong(args[0]), cos = PyLong_AsUnsignedLongLong(args[1]);
    uintptr_t sin = PyLong_AsUnsignedLongLong(args[2]), out = PyLong_AsUnsignedLongLong(args[3]);
    long long n = PyLong_AsLongLong(args[4]), hd = PyLong_AsLongLong(args[5]);
    if (PyErr_Occurred()) return NULL;
    if (!x || !cos || !sin || !out || (x | cos | sin | out) % 4 || n < 0 || hd <= 0 || hd % 2) {
        PyErr_Format(PyExc_ValueError, "rope_turn needs aligned float32 buffers, n >= 0 and an "
                     "even hd > 0 (got n=%lld, hd=%lld)", n, hd);
        return NULL;
    }
    rows_turn((const float *)x, (const float *)cos, (const float *)sin, (float *)out, n, hd);
    Py_RETURN_NONE;
}

static PyObject *rms_norm(PyObject *Py_UNUSED(self), PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 7) {
        PyErr_SetString(PyExc_TypeError, "rms_norm(x, scale, out, rows, d, eps, lanes) takes 7 "
                        "arguments");
        return NULL;
    }
    uintptr_t x = PyLong_AsUnsignedLongLong(args[0]), scale = PyLong_AsUnsignedLongLong(args[1]);
    uintptr_t out = PyLong_AsUnsignedLongLong(args[2]);
    long long rows = PyLong_AsLongLong(args[3]), d = PyLong_AsLongLong(args[4]);
    double eps = PyFloat_AsDouble(args[5]);
    long lanes = PyLong_AsLong(args[6]);
    if (PyErr_Occurred()) return NULL;
    if (!x || !scale || !out || (x | scale | out) % 4 || rows < 0 || (lanes != 8 && lanes != 16)
        || d < lanes) {
        PyErr_Format(PyExc_ValueError, "rms_norm needs aligned float32 buffers, rows >= 0 and "
                     "d >= lanes, lanes 8 or 16 (got rows=%lld, d=%lld, lanes=%ld)", rows, d,
                     lanes);
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS
    rows_rms_norm((const float *)x, (const float *)scale, (float *)out, rows, d, (float)eps,
                  (int)lanes);
    Py_END_ALLOW_THREADS
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"rms_norm", (PyCFunction)(void (*)(void))rms_norm, METH_FASTCALL,
     "rms_norm(x, scale, out, rows, d, eps, lanes): out = scale · x / RMS(x) over each of rows "
     "rows of d float32 values (pointers as integers), summed as torch sums on lanes-wide "
     "vectors."},
    {"rope_turn", (PyCFunction)(void (*)(void))rope_turn, METH_FASTCALL,
     "rope_turn(x, cos, sin, out, n, hd): out = x·cos + roll(x, hd/2)·sin on n rows of hd "
     "float32 values (cos and sin one row of hd; pointers as integers)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "attncli.models.llama._rows",
    "A step's RMSNorm and RoPE on float32 rows, with torch's bits (llama/block.py, rope.py).", -1, methods,
};

PyMODINIT_FUNC PyInit__rows(void) { return PyModule_Create(&module); }
