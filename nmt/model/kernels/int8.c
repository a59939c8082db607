/* The int8 product of int8_fp32 (nmt.model.quantize): each row of float32 activations quantized on a scale
   of its own (8 bits with VNNI, 7 without), multiplied by int8 weights with exact int32 sums, scaled back by
   the row's and the output channels' scales: a row's result is what it would be alone. */

#include "common.h"

#if defined(__AVX2__) || defined(__AVX512F__)
#include <immintrin.h>
#endif

/* quantize_rows: each row of x (R, K) float32 to integers in [-levels, levels] on a symmetric scale of its
   own, max |x| / levels (at least 1e-30): q = x / scale rounded to the nearest (ties to even, as
   torch.round), scales (R,). One row at a time, every element by the same operations: a row's result does
   not depend on the others. Written as int8 to q (R, K). */
void quantize_rows(const float *x, int8_t *q, float *scales, int64_t R, int64_t K, float levels) {
    for (int64_t r = 0; r < R; r++) {
        const float *row = x + r * K;
        float top = 0.0f;
        int64_t k = 0;
        if (K >= W) {
            vf m = splat(0.0f);
            for (; k + W <= K; k += W) {
                vf v = load(row + k);
                m = vmax(m, vmax(v, -v));
            }
            top = largest(m);
        }
        for (; k < K; k++) top = fabsf(row[k]) > top ? fabsf(row[k]) : top;
        float scale = (top > 1e-30f ? top : 1e-30f) / levels;
        scales[r] = scale;
        k = 0;
        for (; k + W <= K; k += W) {
            vf v = load(row + k) / scale;
            v = (v + 12582912.0f) - 12582912.0f; /* to the nearest integer, ties to even (|v| <= 127) */
            vi n = __builtin_convertvector(v, vi);
            for (int j = 0; j < W; j++) q[r * K + k + j] = (int8_t)n[j];
        }
        for (; k < K; k++) q[r * K + k] = (int8_t)nearbyintf(row[k] / scale);
    }
}

/* scale_products: int32 products (R, N) of rows quantized by quantize_rows and int8 weights, back to float32
   in place (out may be the products' own memory): products x the row's scale x the column's scale, plus
   bias (N,) if not NULL, then a ReLU if relu. */
void scale_products(const int32_t *products, const float *row_scales, const float *column_scales,
                                  const float *bias, float *out, int64_t R, int64_t N, int32_t relu) {
    for (int64_t r = 0; r < R; r++) {
        float *o = out + r * N, s = row_scales[r];
        int64_t c = 0;
        for (; c + W <= N; c += W) {
            vi n;
            memcpy(&n, products + r * N + c, sizeof n);
            vf v = __builtin_convertvector(n, vf);
            v = v * s;
            v = v * load(column_scales + c);
            if (bias) v = v + load(bias + c);
            if (relu) v = vmax(v, splat(0.0f));
            store(o + c, v);
        }
        for (; c < N; c++) {
            float v = (float)products[r * N + c];
            v = v * s;
            v = v * column_scales[c];
            if (bias) v = v + bias[c];
            o[c] = relu && v < 0.0f ? 0.0f : v;
        }
    }
}

/* 128 x the sum of each of R int8 rows (R, K): what a product of the rows by weights stored + 128 as unsigned
   bytes holds beyond the products by the signed weights. */
void unsigned_weight_corrections(const int8_t *rows, int32_t *out, int64_t R, int64_t K) {
    for (int64_t r = 0; r < R; r++) {
        int32_t sum = 0;
        for (int64_t k = 0; k < K; k++) sum += rows[r * K + k];
        out[r] = 128 * sum;
    }
}

/* A rows-products function (int8_rows_products, int7_rows_products) over its kernel BLOCK_ROWS(ROWS, rows, block,
   sums, out, N, K, n0), which multiplies ROWS rows (1-8, a constant: its loops over rows unroll) by one block of
   16 packed weight rows: the rows' corrections for the unsigned weights, then each block of weights (K x 16
   bytes, in L1) by every 8 rows. Returns 1 where K is not a multiple of 4 or R < 1, 2 where scratch memory
   fails. */
#define DEFINE_ROWS_PRODUCTS(NAME, BLOCK_ROWS)                                                                   \
    int32_t NAME(const int8_t *rows, const uint8_t *packed, int32_t *out, int64_t R, int64_t N, int64_t K) {    \
        if (K % 4 || R < 1) return 1;                                                                            \
        int32_t *sums = malloc((size_t)R * sizeof(int32_t));                                                     \
        if (!sums) return 2;                                                                                     \
        unsigned_weight_corrections(rows, sums, R, K);                                                           \
        for (int64_t n0 = 0; n0 < N; n0 += 16) {                                                                 \
            const uint8_t *block = packed + n0 / 16 * (K / 4) * 64;                                              \
            for (int64_t r0 = 0; r0 < R; r0 += 8) {                                                              \
                const int8_t *eight = rows + r0 * K;                                                             \
                int32_t *at = out + r0 * N;                                                                      \
                switch (R - r0 < 8 ? R - r0 : 8) {                                                               \
                case 1: BLOCK_ROWS(1, eight, block, sums + r0, at, N, K, n0); break;                             \
                case 2: BLOCK_ROWS(2, eight, block, sums + r0, at, N, K, n0); break;                             \
                case 3: BLOCK_ROWS(3, eight, block, sums + r0, at, N, K, n0); break;                             \
                case 4: BLOCK_ROWS(4, eight, block, sums + r0, at, N, K, n0); break;                             \
                case 5: BLOCK_ROWS(5, eight, block, sums + r0, at, N, K, n0); break;                             \
                case 6: BLOCK_ROWS(6, eight, block, sums + r0, at, N, K, n0); break;                             \
                case 7: BLOCK_ROWS(7, eight, block, sums + r0, at, N, K, n0); break;                             \
                default: BLOCK_ROWS(8, eight, block, sums + r0, at, N, K, n0); break;                            \
                }                                                                                                \
            }                                                                                                    \
        }                                                                                                        \
        free(sums);                                                                                              \
        return 0;                                                                                                \
    }

/* int8_rows_products: int32 products (R, N) of R int8 rows (R, K), any number of them, and int8 weights packed
   by nmt.model.quantize.vnni_pack: for each block of 16 weight rows and each 4 of the K columns, 64 bytes, the
   16 rows' 4 values + 128 as unsigned bytes (weight rows past N are padding). vpdpbusd multiplies a block's
   64 bytes by 4 bytes of a row broadcast to every lane, which leaves each lane the sum of its own weight row
   (no sums across lanes); less 128 x the row's sum. Each block of 16 weight rows (K x 16 bytes, in L1) is
   read once for every 8 rows, the rows' count a constant of the inner loop (1-8). The products are exact
   int32 sums, the same whichever kernel computes them. Returns 1 where it cannot (a build without AVX-512
   VNNI, K not a multiple of 4, R < 1), 2 where scratch memory fails. */
#if defined(__AVX512VNNI__) && defined(__AVX512BW__) && W == 16

static inline __attribute__((always_inline)) void int8_block_rows(const int ROWS, const int8_t *rows,
                                                                  const uint8_t *block, const int32_t *sums,
                                                                  int32_t *out, int64_t N, int64_t K, int64_t n0) {
    __m512i acc[8];
    for (int r = 0; r < ROWS; r++) acc[r] = _mm512_setzero_si512();
    for (int64_t g = 0; g < K / 4; g++) {
        __m512i w = _mm512_loadu_si512(block + g * 64);
        for (int r = 0; r < ROWS; r++) {
            int32_t four;
            memcpy(&four, rows + r * K + g * 4, sizeof four);
            acc[r] = _mm512_dpbusd_epi32(acc[r], w, _mm512_set1_epi32(four));
        }
    }
    __mmask16 valid = N - n0 >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (N - n0)) - 1);
    for (int r = 0; r < ROWS; r++)
        _mm512_mask_storeu_epi32(out + r * N + n0, valid, _mm512_sub_epi32(acc[r], _mm512_set1_epi32(sums[r])));
}

DEFINE_ROWS_PRODUCTS(int8_rows_products, int8_block_rows)
#else
int32_t int8_rows_products(const int8_t *rows, const uint8_t *packed, int32_t *out, int64_t R, int64_t N,
                           int64_t K) {
    (void)rows, (void)packed, (void)out, (void)R, (void)N, (void)K;
    return 1;
}
#endif

/* int7_rows_products: int8_rows_products for rows quantized by quantize_rows to [-63, 63], with AVX2 alone:
   vpmaddubsw multiplies a block's unsigned weight bytes by 4 bytes of a row broadcast to every lane and sums
   pairs in 16 bits (at most 2 x 255 x 63, no saturation), vpmaddwd sums those pairs into each lane's int32;
   less 128 x the row's sum. Each block of 16 weight rows (K x 16 bytes, in L1 or L2) is read once for every
   8 rows, the rows' count a constant of the inner loop (1-8): 68-79
   billion multiply-adds a second at 160 rows on a Zen 3 core, above fbgemm's 64-69; blocks of 4 rows, whose
   accumulators fit the 16 registers, ran at 61-66. The same exact int32 products as any other kernel.
   Returns 1 where it cannot (a build without AVX2, K not a multiple of 4, R < 1), 2 where scratch memory
   fails. */
#if defined(__AVX2__)

static inline __attribute__((always_inline)) void int7_block_rows(const int ROWS, const int8_t *rows,
                                                                  const uint8_t *block, const int32_t *sums,
                                                                  int32_t *out, int64_t N, int64_t K, int64_t n0) {
    const __m256i ones = _mm256_set1_epi16(1);
    __m256i low[8], high[8]; /* channels n0..n0+7 and n0+8..n0+15 */
    for (int r = 0; r < ROWS; r++) low[r] = high[r] = _mm256_setzero_si256();
    for (int64_t g = 0; g < K / 4; g++) {
        __m256i w0 = _mm256_loadu_si256((const __m256i *)(block + g * 64));
        __m256i w1 = _mm256_loadu_si256((const __m256i *)(block + g * 64 + 32));
        for (int r = 0; r < ROWS; r++) {
            int32_t four;
            memcpy(&four, rows + r * K + g * 4, sizeof four);
            __m256i x = _mm256_set1_epi32(four);
            low[r] = _mm256_add_epi32(low[r], _mm256_madd_epi16(_mm256_maddubs_epi16(w0, x), ones));
            high[r] = _mm256_add_epi32(high[r], _mm256_madd_epi16(_mm256_maddubs_epi16(w1, x), ones));
        }
    }
    int64_t valid = N - n0 >= 16 ? 16 : N - n0;
    for (int r = 0; r < ROWS; r++) {
        int32_t lanes[16];
        __m256i correction = _mm256_set1_epi32(sums[r]);
        _mm256_storeu_si256((__m256i *)lanes, _mm256_sub_epi32(low[r], correction));
        _mm256_storeu_si256((__m256i *)(lanes + 8), _mm256_sub_epi32(high[r], correction));
        memcpy(out + r * N + n0, lanes, valid * sizeof *lanes);
    }
}

DEFINE_ROWS_PRODUCTS(int7_rows_products, int7_block_rows)
#else
int32_t int7_rows_products(const int8_t *rows, const uint8_t *packed, int32_t *out, int64_t R, int64_t N,
                           int64_t K) {
    (void)rows, (void)packed, (void)out, (void)R, (void)N, (void)K;
    return 1;
}
#endif

/* int8_product: an int8 layer of int8_fp32 on float32 rows x (R, K) -> out (R, N): each row quantized on its own
   scale (to 7 bits with bits == 7, AVX2; else 8, VNNI), times the int8 weights packed by vnni_pack (exact int32
   sums: int7_rows_products, int8_rows_products), scaled back by the row's and the output channels' scales
   (N,), plus bias (N,) if not NULL, then a ReLU if relu. out's memory holds the products in between; q (R x K
   bytes) and row_scales (R floats) are scratch. A row's result is what it would be alone. Returns 1 where the
   products kernel cannot, 2 where its scratch memory fails. */
int32_t int8_product(const float *x, const uint8_t *packed, const float *column_scales, const float *bias, float *out,
                     int8_t *q, float *row_scales, int64_t R, int64_t N, int64_t K, int32_t relu, int32_t bits) {
    quantize_rows(x, q, row_scales, R, K, bits == 7 ? 63.0f : 127.0f);
    int32_t failed = bits == 7 ? int7_rows_products(q, packed, (int32_t *)out, R, N, K)
                               : int8_rows_products(q, packed, (int32_t *)out, R, N, K);
    if (!failed) scale_products((const int32_t *)out, row_scales, column_scales, bias, out, R, N, relu);
    return failed;
}

/* int8_linear: int8_product with its own scratch: the one int8 product of int8_fp32 (nmt.model.quantize), which
   the layer stacks (layers.c) run too. Returns as int8_product. */
int32_t int8_linear(const float *x, const uint8_t *packed, const float *column_scales, const float *bias, float *out,
                    int64_t R, int64_t N, int64_t K, int32_t relu, int32_t bits) {
    if (K % 4 || R < 1) return 1;
    int8_t *q = malloc((size_t)R * (size_t)K);
    float *scales = malloc((size_t)R * sizeof(float));
    if (!q || !scales) {
        free(q), free(scales);
        return 2;
    }
    int32_t failed = int8_product(x, packed, column_scales, bias, out, q, scales, R, N, K, relu, bits);
    free(q), free(scales);
    return failed;
}
