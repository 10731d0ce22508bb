/* x @ Wᵀ with W held as GGUF's quantized blocks: float32 activations, weights dequantized on
 * the fly a chunk at a time (never a float32 copy of the matrix).
 *
 * matmul(qtype, blocks, cols, x, out, threads): W (rows, cols) as rows of whole blocks, x
 * (T, cols) float32, out (T, rows) float32. One token takes the matrix × vector kernel (decode;
 * Q4_K and Q6_K on integers, the token in fixed point: _qmatmul_fixed.h); several take the
 * matrix × matrix one (a prompt), which dequantizes a panel of rows once for a tile of tokens.
 * The kernels (_qmatmul_body.h) are compiled once per vector level and the widest this CPU runs
 * is chosen when the module loads (use_level picks another, for the tests).
 * Rows are split across a pool of threads (pthreads, kept between calls), the GIL released;
 * every size is checked here, from the buffers themselves. Built by setuptools as an optional
 * extension: without it, qmatmul.py dequantizes as before.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* The weights are dequantized with the gguf package's float32 operations, each rounded:
 * setup.py passes -ffp-contract=off, so no product and sum is fused unless a kernel says so. */
#if defined(__FAST_MATH__) || (defined(FLT_EVAL_METHOD) && FLT_EVAL_METHOD != 0)
#error "attncli's quantized matmul needs strict float32 arithmetic (no -ffast-math, no x87)"
#endif

#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 12 && defined(__x86_64__)
#define X86_LEVELS 1 /* the kernels compiled for SSE2, AVX2 and AVX-512; chosen at load */
#include <immintrin.h>
#endif
#if defined(__ARM_NEON) && defined(__aarch64__)
#include <arm_neon.h>
#endif

#if defined(__GNUC__)
#define ALWAYS_INLINE inline __attribute__((always_inline))
#else
#define ALWAYS_INLINE inline
#endif

#define QK_K 256
#define CHUNK 256  /* values of a row dequantized at once by matvec (1 KB: first-level cache) */
#define KC 1024    /* matmat: values of each row per panel */
#define MC 16      /* matmat: rows per panel (64 KB of float32) */
#define NTILE 128  /* matmat: tokens multiplied with each panel */
#define MAX_THREADS 256
#define PART_WORK (1 << 18) /* multiply-adds worth a thread of their own (a wake costs µs) */
#define MULADD(a, b, c) ((a) * (b) + (c))

typedef void (*block_fn)(const uint8_t *x, float *y, int64_t n); /* n blocks */

/* GGMLQuantizationType's numbers, values and bytes per block; index: the kernels' tables. */
typedef struct { int qtype, block, bytes, index; } kind;
enum { KINDS = 11 };
static const kind KIND[KINDS] = {
    {0, 1, 4, 0},      {1, 1, 2, 1},      {30, 1, 2, 2},     {8, 32, 34, 3},
    {2, 32, 18, 4},    {3, 32, 20, 5},    {6, 32, 22, 6},    {7, 32, 24, 7},
    {12, 256, 144, 8}, {13, 256, 176, 9}, {14, 256, 210, 10},
};

#include "_half.h"  /* from_bits, to_bits, f16: exactly as _dequant.c converts halves */

/* float32 to IEEE half, rounded to nearest even, as numpy's astype(float16) and ggml's
 * GGML_FP32_TO_FP16 round it (the FP16 library's bit-exact method; NaN to a quiet NaN). */
static inline void put_f16(uint8_t *p, float f) {
    const uint32_t w = to_bits(f), shl1_w = w + w, sign = w & 0x80000000u;
    float base = (fabsf(f) * 0x1p112f) * 0x1p-110f;
    uint32_t bias = shl1_w & 0xFF000000u;
    if (bias < 0x71000000u) bias = 0x71000000u;
    base = from_bits((bias >> 1) + 0x07800000u) + base;
    const uint32_t bits = to_bits(base);
    const uint32_t nonsign = ((bits >> 13) & 0x7C00u) + (bits & 0x0FFFu);
    const uint32_t h = (sign >> 16) | (shl1_w > 0xFF000000u ? 0x7E00u : nonsign);
    p[0] = (uint8_t)h, p[1] = (uint8_t)(h >> 8);
}

/* roundf (halves away from zero) to int8, as ggml's reference Q8_0 rounds x·(1/d), |x·(1/d)| <=
 * 127 up to a rounding; saturated and NaN to 0, so no conversion is undefined. */
static inline int8_t round_int8(float v) {
    if (!(v == v)) return 0;
    float r = roundf(v);
    return (int8_t)(r > 127.0f ? 127 : r < -128.0f ? -128 : (int)r);
}

/* ggml's nearest_int: v rounded to nearest even through the float 1.5·2²³ (|v| < 2²²). */
static inline int nearest_int(float v) {
    if (!(fabsf(v) < 0x1p22f)) return v > 0 ? 127 : v < 0 ? -128 : 0;
    uint32_t i = to_bits(v + 12582912.0f);
    return (int)(i & 0x007FFFFFu) - 0x00400000;
}

#define Q8K_BYTES (4 + QK_K + 32) /* float d, 256 int8, 16 int16 sums */

static inline uint32_t u32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
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

/* The same six-bit scales (s) and mins (m) as integers, byte g of each word group g's: the 12
 * bytes taken four a word, as the vector kernels unpack them. */
static inline void scale_min_k_words(const uint8_t *sc, uint64_t *s, uint64_t *m) {
    const uint32_t u0 = u32(sc), u1 = u32(sc + 4), u2 = u32(sc + 8);
    *s = (u0 & 0x3F3F3F3Fu) | (uint64_t)((u2 & 0x0F0F0F0Fu) | ((u0 >> 2) & 0x30303030u)) << 32;
    *m = (u1 & 0x3F3F3F3Fu) |
         (uint64_t)(((u2 >> 4) & 0x0F0F0F0Fu) | ((u1 >> 2) & 0x30303030u)) << 32;
}

/* llama.cpp's numerics (_qmatmul_q8.h): each weight type's activation type (-1: float32). */
enum { A_Q8_0 = 0, A_Q8_1 = 1, A_Q8_K = 2 };
static const int ACTIVATION[KINDS] = {-1, -1, -1, A_Q8_0, A_Q8_0, A_Q8_1, A_Q8_0, A_Q8_1,
                                      A_Q8_K, A_Q8_K, A_Q8_K};
static const int64_t ACT_BLOCK[3] = {32, 32, QK_K}, ACT_BYTES[3] = {34, 36, Q8K_BYTES};

typedef float (*dot_fn)(const uint8_t *w, const uint8_t *x, int64_t n);
/* 1: the AVX-512 level's legacy dot products take VNNI's vpdpbusd (the CPU reports it). */
static int vnni = 0;
typedef void (*matmul_q8_fn)(const kind *, const uint8_t *, int64_t, int64_t, const uint8_t *,
                             int64_t, int64_t, float *, int64_t, int64_t);
typedef void (*quantize_fn)(int, const float *, int64_t, int64_t, uint8_t *, int64_t);
typedef void (*row_fn)(const uint8_t *w, int64_t cols, const float *x, float *y, int64_t r0,
                       int64_t r1); /* a type's one-token kernel: rows r0..r1 */
/* 1: one token's product takes its type's kernel that makes the weights in registers where the
 * level has one, or Q4_K's and Q6_K's on integers (_qmatmul_fixed.h); 0: every type's chunk
 * path (use_level's second argument, for the tests). */
static int registers = 1;
typedef void (*matvec_fn)(const kind *, const uint8_t *, int64_t, const float *, float *,
                          int64_t, int64_t);
typedef void (*matmat_fn)(const kind *, const uint8_t *, int64_t, int64_t, const float *,
                          int64_t, float *, int64_t, int64_t, float *);

/* Float32 numerics on integers (_qmatmul_fixed.h): a token's values in fixed point, a block of
 * 256 at a time as FIX_BYTES: int16 D0[256] (K & 0x7FFF), int16 D1[256] (K >> 15) from FIX_D1,
 * ΣK over each 32 values as float64 (exact: |ΣK| <= 2^34) from FIX_SUMS (Q4_K's mins take them),
 * and the float64 s = 2^(E−29) at FIX_SCALE, where
 * K = x·2^(29−E) rounded to the nearest integer and 2^E just above the block's largest |x|. */
enum { FIX_D1 = 512, FIX_SUMS = 1024, FIX_SCALE = 1088, FIX_BYTES = 1152 };
/* One-token kernels ask for the weights PREFETCH_AHEAD bytes past the block they take, a
 * block's bytes at a time: a decode reads them from memory, and the hardware's prefetchers
 * alone kept too few lines in flight (1B shape, Q4_K and Q6_K 2,048 × 8,192: 18.5 and 19.4 ms
 * a step without, 11.0 and 12.8 with, 2,304 bytes ahead; 1,152 to 9,216 bytes ahead stream
 * Q4_K at 17.9–18.0 G weights/s, Q6_K at 14.7–15.0). A prefetch is a hint: an address past the
 * buffer never faults, and it is made as an integer so no pointer points past it. */
#define PREFETCH_AHEAD 2304
#if defined(X86_LEVELS)
#define PREFETCH(p, bytes)                                                                   \
    do {                                                                                     \
        for (int line = 0; line < (bytes); line += 64)                                       \
            _mm_prefetch((const char *)((uintptr_t)(p) + PREFETCH_AHEAD + line), _MM_HINT_T0); \
    } while (0)
#else
#define PREFETCH(p, bytes) ((void)0)
#endif
typedef void (*fixed_fn)(const uint8_t *w, int64_t cols, const float *x, const uint8_t *xq,
                         float *y, int64_t r0, int64_t r1);

/* x's cols values (a multiple of 256) into xq's blocks; 0 where a value is inf or NaN. The
 * loops are plain so the compiler vectorises them (setup.py's -fno-math-errno lets lrintf be
 * one conversion, rounding to nearest even as the CPU's default mode does). */
static int fix_rows(const float *x, int64_t cols, uint8_t *xq) {
    for (int64_t b = 0; b < cols / QK_K; b++, x += QK_K, xq += FIX_BYTES) {
        float amax = 0.0f;
        int finite = 1;
        for (int l = 0; l < QK_K; l++) {
            finite &= fabsf(x[l]) <= FLT_MAX;
            amax = fmaxf(amax, fabsf(x[l]));
        }
        if (!finite) return 0;
        int e = 0;
        frexpf(amax, &e);  /* amax < 2^e (e = 0 for 0) */
        float scaled[QK_K];
        if (29 - e >= -126 && 29 - e <= 127) {  /* 2^(29 − e) a float32: an exact product */
            const float p = from_bits((uint32_t)(127 + 29 - e) << 23);
            for (int l = 0; l < QK_K; l++) scaled[l] = x[l] * p;
        } else {
            for (int l = 0; l < QK_K; l++) scaled[l] = ldexpf(x[l], 29 - e);
        }
        int32_t k[QK_K];  /* |K| <= 2^29, rounded to nearest even */
        for (int l = 0; l < QK_K; l++) k[l] = (int32_t)lrintf(scaled[l]);
        int16_t d0[QK_K], d1[QK_K];
        for (int l = 0; l < QK_K; l++) d0[l] = (int16_t)(k[l] & 0x7FFF), d1[l] = (int16_t)(k[l] >> 15);
        double sums[8];
        for (int g = 0; g < 8; g++) {
            int32_t low = 0, high = 0;  /* |Σ| <= 2^20: ΣK = Σd0 + 2^15·Σd1, exact */
            for (int l = 32 * g; l < 32 * g + 32; l++) low += d0[l], high += d1[l];
            sums[g] = (double)low + 32768.0 * (double)high;
        }
        const double s = ldexp(1.0, e - 29);
        memcpy(xq, d0, sizeof d0), memcpy(xq + FIX_D1, d1, sizeof d1);
        memcpy(xq + FIX_SUMS, sums, sizeof sums), memcpy(xq + FIX_SCALE, &s, sizeof s);
    }
    return 1;
}

static inline double fix_scale(const uint8_t *fx) {
    double s;
    memcpy(&s, fx + FIX_SCALE, sizeof s);
    return s;
}

/* Σ_g m_g·ΣK_g over a block's 8 groups of 32 (m: scale_min_k_words' mins): exact in float64
 * (|·| <= 8·63·2^34). */
static inline double fixed_mins(const uint8_t *fx, uint64_t m) {
    double sums[8], t = 0.0;
    memcpy(sums, fx + FIX_SUMS, sizeof sums);
    for (int g = 0; g < 8; g++) t += (double)((m >> (8 * g)) & 0xFF) * sums[g];
    return t;
}

#define LV(name) name##_base
#include "_qmatmul_body.h"
#include "_qmatmul_q8.h"
#include "_qmatmul_fixed.h"
#undef LV
#undef LV_MICRO
#undef MATVEC_REGISTERS
#ifdef X86_LEVELS
#pragma GCC push_options
#pragma GCC target("arch=x86-64-v3")
#define LV(name) name##_avx2
#include "_qmatmul_body.h"
#include "_qmatmul_q8.h"
#include "_qmatmul_fixed.h"
#undef LV
#undef LV_MICRO
#undef MATVEC_REGISTERS
#pragma GCC pop_options
#pragma GCC push_options
#pragma GCC target("arch=x86-64-v4")
#define LV(name) name##_avx512
#include "_qmatmul_body.h"
#include "_qmatmul_q8.h"
#include "_qmatmul_fixed.h"
#undef LV
#undef LV_MICRO
#undef MATVEC_REGISTERS
#pragma GCC pop_options
#endif

static matvec_fn matvec = matvec_base;  /* set when the module loads (choose_level) */
static matmat_fn matmat = matmat_base;
static matmul_q8_fn matmul_q8 = matmul_q8_base;
static quantize_fn quantize_rows = quantize_rows_base;
static fixed_fn (*fixed_kernel)(int) = fixed_kernel_base;

/* 0 the baseline, 1 AVX2 + FMA, 2 AVX-512; -1 the widest this CPU runs. Returns the level. */
static int choose_level(int level) {
    int best = 0;
#ifdef X86_LEVELS
    __builtin_cpu_init();
    best = __builtin_cpu_supports("x86-64-v4") ? 2 : __builtin_cpu_supports("x86-64-v3") ? 1 : 0;
#endif
    if (level < 0 || level > best) level = best;
    vnni = 0;
    matvec = matvec_base, matmat = matmat_base;
    matmul_q8 = matmul_q8_base, quantize_rows = quantize_rows_base;
    fixed_kernel = fixed_kernel_base;
#ifdef X86_LEVELS
    if (level == 1) matvec = matvec_avx2, matmat = matmat_avx2;
    if (level == 1) matmul_q8 = matmul_q8_avx2, quantize_rows = quantize_rows_avx2;
    if (level == 2) matvec = matvec_avx512, matmat = matmat_avx512;
    if (level == 2) matmul_q8 = matmul_q8_avx512, quantize_rows = quantize_rows_avx512;
    if (level == 1) fixed_kernel = fixed_kernel_avx2;
    if (level == 2) fixed_kernel = fixed_kernel_avx512;
    if (level == 2) vnni = __builtin_cpu_supports("avx512vnni");
#endif
    return level;
}

/* One call's work: its rows cut into chunks of whole panels (16 rows: the matmat's MC, four
 * groups of the 4-row tiles), which the parts' threads take in turn, each the next chunk not yet
 * taken (a thread that a busy core slows takes fewer, instead of the others waiting on its
 * share); every output depends on its row alone, so any chunk's thread gives the same bits. */
typedef struct {
    const kind *t;
    const uint8_t *w;
    const float *x;
    float *y;
    int64_t rows, cols, tokens, parts;
    const uint8_t *xq; /* llama.cpp's numerics: x's rows quantized (xq_bytes each), else NULL */
    int64_t xq_bytes;
    fixed_fn fixed; /* one token in fixed point (xq its blocks), else NULL */
} job;
#define CHUNKS_PER_PART 8 /* enough for a slowed thread's share to move to the others */

static void run_rows(const job *j, int64_t r0, int64_t r1) {
    if (j->fixed) {
        j->fixed(j->w, j->cols, j->x, j->xq, j->y, r0, r1);
    } else if (j->xq) {
        matmul_q8(j->t, j->w, j->rows, j->cols, j->xq, j->xq_bytes, j->tokens, j->y, r0, r1);
    } else if (j->tokens == 1) {
        matvec(j->t, j->w, j->cols, j->x, j->y, r0, r1);
    } else {
        float panel[MC * KC] __attribute__((aligned(64))); /* 64 KB of the thread's stack */
        matmat(j->t, j->w, j->rows, j->cols, j->x, j->tokens, j->y, r0, r1, panel);
    }
}

/* Rows per chunk: the rows split into CHUNKS_PER_PART chunks a part, in whole panels. */
static int64_t chunk_rows(const job *j) {
    int64_t panels = (j->rows + MC - 1) / MC, chunks = j->parts * CHUNKS_PER_PART;
    return (panels + chunks - 1) / chunks * MC;
}

/* The chunks taken by one thread: the next not yet taken (*next, shared), until none is left. */
static void run_chunks(const job *j, int64_t *next) {
    const int64_t size = chunk_rows(j);
    for (;;) {
        int64_t r0 = __atomic_fetch_add(next, 1, __ATOMIC_RELAXED) * size;
        if (r0 >= j->rows) return;
        run_rows(j, r0, r0 + size < j->rows ? r0 + size : j->rows);
    }
}

/* The pool: workers wait for a new generation of work, run their part, and count down. A
 * worker spins briefly before it sleeps, so a decode's back-to-back calls do not wait on the
 * scheduler; one call at a time uses the pool (another runs on its own thread alone). */
static pthread_mutex_t pool_use = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t pool_wake = PTHREAD_COND_INITIALIZER, pool_done = PTHREAD_COND_INITIALIZER;
static int pool_size = 0;            /* workers started (threads beside the caller) */
static pid_t pool_pid = 0;           /* the process that started them (a fork has none) */
static uint64_t pool_generation = 0; /* bumped for each job */
static int64_t pool_left = 0;        /* parts not yet finished */
static int64_t pool_next = 0;        /* the job's next chunk not yet taken */
static job pool_job;
#define SPIN_NS 50000

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static inline void relax(void) {
#ifdef X86_LEVELS
    _mm_pause();
#endif
}

static void *worker(void *arg) {
    int64_t index = (int64_t)(intptr_t)arg; /* 1..pool_size */
    uint64_t seen = 0;
    for (;;) {
        int64_t spin_until = now_ns() + SPIN_NS;
        while (__atomic_load_n(&pool_generation, __ATOMIC_ACQUIRE) == seen &&
               now_ns() < spin_until)
            for (int i = 0; i < 64; i++) relax();
        pthread_mutex_lock(&pool_lock);
        while (pool_generation == seen) pthread_cond_wait(&pool_wake, &pool_lock);
        seen = pool_generation;
        job j = pool_job;
        pthread_mutex_unlock(&pool_lock);
        if (index < j.parts) {
            run_chunks(&j, &pool_next);
            if (__atomic_sub_fetch(&pool_left, 1, __ATOMIC_ACQ_REL) == 0) {
                pthread_mutex_lock(&pool_lock);
                pthread_cond_signal(&pool_done);
                pthread_mutex_unlock(&pool_lock);
            }
        }
    }
    return NULL;
}

/* Workers enough for parts - 1 beside the caller (fewer where threads cannot start). */
static int64_t grow_pool(int64_t parts) {
    if (pool_pid != getpid()) pool_size = 0, pool_pid = getpid(); /* a forked child: none */
    while (pool_size < parts - 1 && pool_size < MAX_THREADS - 1) {
        pthread_t id;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        int failed = pthread_create(&id, &attr, worker, (void *)(intptr_t)(pool_size + 1));
        pthread_attr_destroy(&attr);
        if (failed) break;
        pool_size++;
    }
    return parts < pool_size + 1 ? parts : pool_size + 1;
}

static void run_job(job *j) {
    if (j->parts > 1 && pthread_mutex_trylock(&pool_use) == 0) {
        j->parts = grow_pool(j->parts);
        if (j->parts > 1) {
            pthread_mutex_lock(&pool_lock);
            pool_job = *j;
            __atomic_store_n(&pool_next, 0, __ATOMIC_RELEASE);
            __atomic_store_n(&pool_left, j->parts - 1, __ATOMIC_RELEASE);
            __atomic_add_fetch(&pool_generation, 1, __ATOMIC_RELEASE);
            pthread_cond_broadcast(&pool_wake);
            pthread_mutex_unlock(&pool_lock);
            run_chunks(j, &pool_next);
            int64_t spin_until = now_ns() + SPIN_NS;
            while (__atomic_load_n(&pool_left, __ATOMIC_ACQUIRE) > 0 && now_ns() < spin_until)
                for (int i = 0; i < 64; i++) relax();
            pthread_mutex_lock(&pool_lock);
            while (__atomic_load_n(&pool_left, __ATOMIC_ACQUIRE) > 0)
                pthread_cond_wait(&pool_done, &pool_lock);
            pthread_mutex_unlock(&pool_lock);
            pthread_mutex_unlock(&pool_use);
            return;
        }
        pthread_mutex_unlock(&pool_use);
    }
    run_rows(j, 0, j->rows); /* the same rows on this thread alone: the same bits */
}

static const kind *find(int qtype) {
    for (int i = 0; i < KINDS; i++)
        if (KIND[i].qtype == qtype) return &KIND[i];
    return NULL;
}

static int aligned4(const Py_buffer *b) { return ((uintptr_t)b->buf & 3) == 0; }

static PyObject *matmul(PyObject *Py_UNUSED(self), PyObject *args) {
    int qtype, q8 = 0;
    long long cols, threads;
    Py_buffer w, x, out;
    if (!PyArg_ParseTuple(args, "iy*Ly*w*L|p", &qtype, &w, &cols, &x, &out, &threads, &q8))
        return NULL;
    const kind *t = find(qtype);
    PyObject *result = NULL;
    if (!t) {
        PyErr_Format(PyExc_ValueError, "no quantized matmul for GGML type %d", qtype);
    } else if (cols <= 0 || cols % t->block || cols > (long long)(PY_SSIZE_T_MAX / 4)) {
        PyErr_Format(PyExc_ValueError, "%lld columns are not whole blocks of %d values of GGML "
                     "type %d", cols, t->block, qtype);
    } else if (w.len % (cols / t->block * t->bytes) || x.len % (cols * 4) || !aligned4(&x) ||
               !aligned4(&out)) {
        PyErr_Format(PyExc_ValueError, "%zd bytes of GGML type %d are not whole rows of %lld "
                     "values, or %zd bytes of float32 not whole (aligned) rows of them",
                     w.len, qtype, cols, x.len);
    } else {
        int64_t rows = w.len / (cols / t->block * t->bytes), tokens = x.len / (cols * 4);
        if (rows != 0 && tokens > PY_SSIZE_T_MAX / 4 / rows) {
            PyErr_SetString(PyExc_ValueError, "the product's size overflows");
        } else if (out.len != tokens * rows * 4) {
            PyErr_Format(PyExc_ValueError, "out holds %zd bytes, not the %lld x %lld float32 of "
                         "the product", out.len, (long long)tokens, (long long)rows);
        } else {
            int64_t parts = threads < 1 ? 1 : threads > MAX_THREADS ? MAX_THREADS : threads;
            int64_t work = rows * cols / PART_WORK * tokens; /* fewer parts for small work */
            if (parts > work) parts = work < 1 ? 1 : work;
            job j = {t, (const uint8_t *)w.buf, (const float *)x.buf, (float *)out.buf, rows,
                     cols, tokens, parts, NULL, 0, NULL};
            int a = q8 ? ACTIVATION[t->index] : -1;
            /* one token of a type with a fixed-point kernel (float32 numerics): x's blocks */
            const fixed_fn fixed = !q8 && tokens == 1 && registers ? fixed_kernel(t->index) : NULL;
            uint8_t *xq = NULL;
            if (a >= 0 && cols % ACT_BLOCK[a]) {
                PyErr_Format(PyExc_ValueError, "%lld columns are not whole Q8 blocks", cols);
            } else if (a >= 0 && !(xq = PyMem_RawMalloc(
                                       (size_t)(tokens * (cols / ACT_BLOCK[a]) * ACT_BYTES[a] + 1)))) {
                PyErr_NoMemory();
            } else {
                j.xq_bytes = a >= 0 ? cols / ACT_BLOCK[a] * ACT_BYTES[a] : 0;
                /* without the fixed point's few KB, the float32 kernel takes the product */
                if (fixed) xq = PyMem_RawMalloc((size_t)(cols / QK_K * FIX_BYTES));
                if (rows > 0 && tokens > 0) {
                    Py_BEGIN_ALLOW_THREADS
                    if (xq && a >= 0) quantize_rows(a, j.x, cols, tokens, xq, j.xq_bytes), j.xq = xq;
                    if (xq && fixed && fix_rows(j.x, cols, xq)) j.xq = xq, j.fixed = fixed;
                    run_job(&j);
                    Py_END_ALLOW_THREADS
                }
                result = Py_NewRef(Py_None);
            }
            PyMem_RawFree(xq);
        }
    }
    PyBuffer_Release(&w);
    PyBuffer_Release(&x);
    PyBuffer_Release(&out);
    return result;
}

static PyObject *quantize(PyObject *Py_UNUSED(self), PyObject *args) {
    int a;
    Py_buffer x, out;
    if (!PyArg_ParseTuple(args, "iy*w*", &a, &x, &out)) return NULL;
    PyObject *result = NULL;
    int64_t values = x.len / 4;
    if (a < 0 || a > 2 || x.len % 4 || !aligned4(&x) || values % ACT_BLOCK[a < 0 || a > 2 ? 0 : a]) {
        PyErr_Format(PyExc_ValueError, "no Q8 type %d, or %zd bytes not whole blocks of float32",
                     a, x.len);
    } else if (out.len != values / ACT_BLOCK[a] * ACT_BYTES[a]) {
        PyErr_Format(PyExc_ValueError, "out holds %zd bytes, not the %lld of the blocks",
                     out.len, (long long)(values / ACT_BLOCK[a] * ACT_BYTES[a]));
    } else {
        quantize_rows(a, (const float *)x.buf, values, 1, (uint8_t *)out.buf, out.len);
        result = Py_NewRef(Py_None);
    }
    PyBuffer_Release(&x);
    PyBuffer_Release(&out);
    return result;
}

static PyObject *kinds(PyObject *Py_UNUSED(self), PyObject *Py_UNUSED(args)) {
    PyObject *dict = PyDict_New();
    for (int i = 0; dict && i < KINDS; i++) {
        PyObject *key = PyLong_FromLong(KIND[i].qtype);
        PyObject *value = Py_BuildValue("(ii)", KIND[i].block, KIND[i].bytes);
        if (!key || !value || PyDict_SetItem(dict, key, value) < 0) Py_CLEAR(dict);
        Py_XDECREF(key);
        Py_XDECREF(value);
    }
    return dict;
}

static PyObject *use_level(PyObject *Py_UNUSED(self), PyObject *args) {
    int level, in_registers = 1, with_vnni = 1;
    if (!PyArg_ParseTuple(args, "i|pp", &level, &in_registers, &with_vnni)) return NULL;
    registers = in_registers;
    level = choose_level(level);
    if (!with_vnni) vnni = 0;
    return PyLong_FromLong(level);
}

static PyMethodDef methods[] = {
    {"matmul", matmul, METH_VARARGS,
     "matmul(qtype, blocks, cols, x, out, threads, q8=False): out (T, rows) = x (T, cols) @ "
     "Wᵀ; q8: on x quantized to 8 bits, with integer dot products, as llama.cpp computes."},
    {"quantize", quantize, METH_VARARGS,
     "quantize(kind, x, out): float32 x as kind 0 Q8_0, 1 Q8_1 or 2 Q8_K blocks, into out."},
    {"kinds", kinds, METH_NOARGS, "{GGML type number: (values, bytes) per block}."},
    {"use_level", use_level, METH_VARARGS,
     "use_level(level, registers=True, vnni=True): choose the kernels' vector level (0 "
     "baseline, 1 AVX2, 2 AVX-512; -1 the widest); registers=False: one token through the "
     "chunk path; vnni=False: AVX-512 without VNNI's instructions where the CPU has them."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "attncli.models.sources.gguf._qmatmul",
    "x @ Wᵀ on GGUF's quantized blocks (see gguf/qmatmul.py).", -1, methods,
};

PyMODINIT_FUNC PyInit__qmatmul(void) {
    choose_level(-1);
    return PyModule_Create(&module);
}
