/* What the kernel files share and do not export: the vectors every loop computes in, and the functions one
   file defines for another (hidden: the library exports nmt_kernels.h alone).

   Every loop computes in float32 vectors of W lanes (GCC/Clang vector extensions): 16 where the compiler
   targets AVX-512, else 8 (AVX2; SSE or NEON split them in two). */

#ifndef NMT_COMMON_H
#define NMT_COMMON_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "nmt_kernels.h"

#define HIDDEN __attribute__((visibility("hidden")))

#if defined(__AVX512F__)
#define W 16
#else
#define W 8
#endif

typedef float vf __attribute__((vector_size(4 * W))); /* W floats */
typedef int32_t vi __attribute__((vector_size(4 * W)));
typedef uint32_t vu __attribute__((vector_size(4 * W)));
typedef uint16_t vh __attribute__((vector_size(2 * W))); /* W bf16 */

static inline vf load_bf16(const uint16_t *p) {
    vh h;
    memcpy(&h, p, sizeof h);
    vu u = __builtin_convertvector(h, vu) << 16;
    vf f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static inline vf load(const float *p) {
    vf f;
    memcpy(&f, p, sizeof f);
    return f;
}

static inline void store(float *p, vf f) { memcpy(p, &f, sizeof f); }

static inline vf splat(float x) {
    vf v = {0};
    return v + x;
}

static inline vf vmax(vf a, vf b) {
    vi greater = a > b, ai, bi;
    memcpy(&ai, &a, sizeof ai);
    memcpy(&bi, &b, sizeof bi);
    vi r = (ai & greater) | (bi & ~greater);
    vf f;
    memcpy(&f, &r, sizeof f);
    return f;
}

static inline float largest(vf v) { /* of the W lanes */
    float best = v[0];
    for (int j = 1; j < W; j++) best = v[j] > best ? v[j] : best;
    return best;
}

static inline float total_of(vf v) { /* the W lanes' sum */
    float sum = 0;
    for (int j = 0; j < W; j++) sum += v[j];
    return sum;
}

static inline int64_t round_up(int64_t x) { return (x + W - 1) / W * W; } /* to whole vectors */

/* exp(x) for x <= 0 (scores minus their maximum): 2^n * exp(r), |r| <= ln(2)/2, by a degree-6 polynomial
   (relative error about 1e-7); 0 below -87, where float32 underflows. */
static inline vf vexp(vf x) {
    x = vmax(x, splat(-87.0f));
    vf t = x * 1.44269504f;
    vf n = (t + 12582912.0f) - 12582912.0f; /* round to the nearest integer */
    vf r = (t - n) * 0.69314718f;
    vf p = 1.0f + r * (1.0f + r * (0.5f + r * (1.0f / 6 + r * (1.0f / 24 + r * (1.0f / 120 + r * (1.0f / 720))))));
    vi bits = (__builtin_convertvector(n, vi) + 127) << 23;
    vf scale;
    memcpy(&scale, &bits, sizeof scale);
    return p * scale;
}

/* Two W-float vectors -> one, taking lanes 0..2W-1 of the pair: Clang's builtin, or GCC's (GCC has Clang's
   only from release 12). */
#if defined(__clang__)
#define SHUFFLE(a, b, ...) __builtin_shufflevector(a, b, __VA_ARGS__)
#else
#define SHUFFLE(a, b, ...) __builtin_shuffle(a, b, (vi){__VA_ARGS__})
#endif

/* a[0..W-1] -> one vector of their W horizontal sums, by halving and interleaving */
#if W == 16
static inline vf sums(const vf *a) {
    vf c[8], d[4], e[2];
    for (int i = 0; i < 8; i++)
        c[i] = SHUFFLE(a[2 * i], a[2 * i + 1], 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23) +
               SHUFFLE(a[2 * i], a[2 * i + 1], 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31);
    for (int i = 0; i < 4; i++)
        d[i] = SHUFFLE(c[2 * i], c[2 * i + 1], 0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24, 25, 26, 27) +
               SHUFFLE(c[2 * i], c[2 * i + 1], 4, 5, 6, 7, 12, 13, 14, 15, 20, 21, 22, 23, 28, 29, 30, 31);
    for (int i = 0; i < 2; i++)
        e[i] = SHUFFLE(d[2 * i], d[2 * i + 1], 0, 1, 4, 5, 8, 9, 12, 13, 16, 17, 20, 21, 24, 25, 28, 29) +
               SHUFFLE(d[2 * i], d[2 * i + 1], 2, 3, 6, 7, 10, 11, 14, 15, 18, 19, 22, 23, 26, 27, 30, 31);
    return SHUFFLE(e[0], e[1], 0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30) +
           SHUFFLE(e[0], e[1], 1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
}
#else
static inline vf sums(const vf *a) {
    vf c[4], d[2];
    for (int i = 0; i < 4; i++)
        c[i] = SHUFFLE(a[2 * i], a[2 * i + 1], 0, 1, 2, 3, 8, 9, 10, 11) +
               SHUFFLE(a[2 * i], a[2 * i + 1], 4, 5, 6, 7, 12, 13, 14, 15);
    for (int i = 0; i < 2; i++)
        d[i] = SHUFFLE(c[2 * i], c[2 * i + 1], 0, 1, 4, 5, 8, 9, 12, 13) +
               SHUFFLE(c[2 * i], c[2 * i + 1], 2, 3, 6, 7, 10, 11, 14, 15);
    return SHUFFLE(d[0], d[1], 0, 2, 4, 6, 8, 10, 12, 14) + SHUFFLE(d[0], d[1], 1, 3, 5, 7, 9, 11, 13, 15);
}
#endif

static inline uint16_t to_bf16(float f) { /* round to nearest even, as torch converts */
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    u += 0x7FFFu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

/* W floats rounded to bf16 as to_bf16 rounds each */
static inline void store_bf16(uint16_t *p, vf f) {
    vu u;
    memcpy(&u, &f, sizeof u);
    u += 0x7FFFu + ((u >> 16) & 1u);
    vh h = __builtin_convertvector(u >> 16, vh);
    memcpy(p, &h, sizeof h);
}

/* Queries and outputs are bf16 (bf16 activations) or float32 (float32 activations, int8_fp32): `f32`. */
static inline vf load_rows(const void *p, int64_t i, int f32) {
    return f32 ? load((const float *)p + i) : load_bf16((const uint16_t *)p + i);
}

static inline void store_rows(void *p, int64_t i, vf f, int f32) {
    if (f32)
        store((float *)p + i, f);
    else
        store_bf16((uint16_t *)p + i, f);
}

static inline void store_value(void *p, int64_t i, float x, int f32) {
    if (f32)
        ((float *)p)[i] = x;
    else
        ((uint16_t *)p)[i] = to_bf16(x);
}

/* logits[i .. i + count - 1] (count <= W) as one vector, lanes past count -inf */
static inline vf load_part(const void *p, int64_t i, int64_t count, int f32) {
    if (count == W) return load_rows(p, i, f32);
    vf v = splat(-__builtin_inff());
    for (int64_t j = 0; j < count; j++) {
        uint32_t u = f32 ? 0 : (uint32_t)((const uint16_t *)p)[i + j] << 16;
        float x;
        memcpy(&x, &u, sizeof x);
        v[j] = f32 ? ((const float *)p)[i + j] : x;
    }
    return v;
}

/* attention.c: the attention of decode_self_attention and decode_cross_attention over scratch `work` the caller
   gives (sized as there), for decode_layers */
HIDDEN void attend_cached(const void *q, const uint16_t *keys, const uint16_t *values, void *out, float *work,
                          int64_t T, int64_t n, int64_t D, float scale, int32_t f32);
HIDDEN void attend_source(const void *q, const uint16_t *keys, const uint16_t *values, const int64_t *lengths,
                          void *out, float *work, int64_t N, int64_t K, int64_t H, int64_t S, int64_t D, float scale,
                          int32_t f32);

/* int8.c: the int8 product (int8_linear's, with scratch from the caller) and its steps */
HIDDEN int32_t int8_product(const float *x, const uint8_t *packed, const float *column_scales, const float *bias,
                            float *out, int8_t *q, float *row_scales, int64_t R, int64_t N, int64_t K, int32_t relu,
                            int32_t bits);
HIDDEN void quantize_rows(const float *x, int8_t *q, float *scales, int64_t R, int64_t K, float levels);
HIDDEN void scale_products(const int32_t *products, const float *row_scales, const float *column_scales,
                           const float *bias, float *out, int64_t R, int64_t N, int32_t relu);
HIDDEN void unsigned_weight_corrections(const int8_t *rows, int32_t *out, int64_t R, int64_t K);

#endif
