/* Each sentence's own target tokens of a lexical shortlist (nmt.model.shortlist): their logits after the
   shared tokens', reading each sentence's output weights once for its beams, over bf16 weights
   (decode_sentence_logits) or int8_fp32's int8 weights without VNNI (decode_sentence_logits_int7). */

#include "common.h"

#if defined(__AVX2__)
#include <immintrin.h>
#endif

/* decode_sentence_logits: the logits (N*K, width) float32 of the K rows of N sentences over each sentence's
   vocabulary (nmt.shortlist): columns 0..F-1 take the shared tokens' logits (N*K, F) as they are, the next
   ones the sentence's own tokens, the rest -inf. Row block s of q belongs to sentence n = sentences[s] of
   the batch; its own tokens are entries starts[n] .. starts[n] + counts[n] - 1 of ids (pieces,), each the
   index of a row of weights (V, D) bf16, plus bias (one float32 per weight row) unless it is NULL; ids
   NULL: entry i is row i. Reading the rows where they are, rather than each sentence's copied out, keeps
   a step's working set at the weights' size (in cache) instead of the sum of the sentences' lists. Returns
   2, having written nothing, where a sentence index lies outside the batch or a sentence's tokens outside
   the ids or the width (the caller checks that the ids lie within the weights). q and shared are bf16
   or, with f32, float32. D % W == 0. Each weight row is read once for the K rows: blocks
   of ROWS rows by PIECES pieces (W dot products) are summed over D together: ROWS 4 for a beam of 4 or
   more, 2 for 2 or 3, 1 for greedy search (where 4 computed the one row's products four times over). */

static inline __attribute__((always_inline)) void own_logits(const int ROWS, const void *q, const void *shared,
                                                             const uint16_t *weights, const int64_t *ids,
                                                             const float *bias, const int64_t *starts,
                                                             const int64_t *counts, const int64_t *sentences,
                                                             float *out, float *qf, int64_t N, int64_t K, int64_t D,
                                                             int64_t F, int64_t width, int f32) {
    for (int64_t i = 0; i < N * K * D; i += W) store(qf + i, load_rows(q, i, f32));
    for (int64_t row = 0; row < N * K; row++) {
        int64_t j = 0;
        for (; j + W <= F; j += W) store(out + row * width + j, load_rows(shared, row * F + j, f32));
        for (; j < F; j++) out[row * width + j] = load_part(shared, row * F + j, 1, f32)[0];
    }
    int64_t room = width - F;
    for (int64_t s = 0; s < N; s++) {
        int64_t n = sentences[s];
        const int64_t start = starts[n], *id = ids ? ids + start : NULL;
        int64_t count = counts[n];
        float *own = out + s * K * width + F; /* row r0 + i of the sentence: own + (r0 + i) * width */
        const int PIECES = W / ROWS; /* pieces at once: ROWS x PIECES dot products, reduced by sums() */
        for (int64_t r0 = 0; r0 < K; r0 += ROWS) {
            const float *qr[4]; /* past the last row: the last row again, its sums dropped */
            for (int i = 0; i < ROWS; i++) qr[i] = qf + (s * K + (r0 + i < K ? r0 + i : K - 1)) * D;
            for (int64_t first = 0; first < count; first += PIECES) {
                const uint16_t *wr[W];
                int64_t entry[W]; /* past the last: the last again, its sums dropped */
                for (int c = 0; c < PIECES; c++) {
                    int64_t j = first + c < count ? first + c : count - 1;
                    entry[c] = id ? id[j] : start + j;
                    wr[c] = weights + entry[c] * D;
                }
                vf a[W];
                for (int j = 0; j < W; j++) a[j] = splat(0.0f);
                for (int64_t d = 0; d < D; d += W) {
                    vf wv[W];
                    for (int c = 0; c < PIECES; c++) wv[c] = load_bf16(wr[c] + d);
                    for (int i = 0; i < ROWS; i++) {
                        vf qv = load(qr[i] + d);
                        for (int c = 0; c < PIECES; c++) a[i * PIECES + c] += qv * wv[c];
                    }
                }
                vf sum = sums(a);
                for (int i = 0; i < ROWS && r0 + i < K; i++)
                    for (int c = 0; c < PIECES && first + c < count; c++)
                        own[(r0 + i) * width + first + c] = sum[i * PIECES + c] + (bias ? bias[entry[c]] : 0.0f);
            }
        }
        for (int64_t row = 0; row < K; row++)
            for (int64_t j = count; j < room; j++) own[row * width + j] = -__builtin_inff();
    }
}

static inline __attribute__((always_inline)) void sentence_logits(const void *q, const void *shared,
                                                                  const uint16_t *weights, const int64_t *ids,
                                                                  const float *bias, const int64_t *starts,
                                                                  const int64_t *counts, const int64_t *sentences,
                                                                  float *out, float *qf, int64_t N, int64_t K,
                                                                  int64_t D, int64_t F, int64_t width, int f32) {
    if (K >= 4)
        own_logits(4, q, shared, weights, ids, bias, starts, counts, sentences, out, qf, N, K, D, F, width, f32);
    else if (K >= 2)
        own_logits(2, q, shared, weights, ids, bias, starts, counts, sentences, out, qf, N, K, D, F, width, f32);
    else
        own_logits(1, q, shared, weights, ids, bias, starts, counts, sentences, out, qf, N, K, D, F, width, f32);
}

/* Whether every sentence of a step lies within the batch and its own tokens within the ids and the room
   after the F shared ones: what both sentence logits kernels check before they read anything. */
static inline int sentences_fit(const int64_t *sentences, int64_t N, int64_t batch, const int64_t *starts,
                                const int64_t *counts, int64_t pieces, int64_t F, int64_t width) {
    for (int64_t s = 0; s < N; s++) {
        int64_t n = sentences[s];
        if (n < 0 || n >= batch || starts[n] < 0 || counts[n] < 0 || counts[n] > width - F ||
            starts[n] > pieces - counts[n])
            return 0;
    }
    return 1;
}

int32_t decode_sentence_logits(const void *q, const void *shared, const uint16_t *weights, const int64_t *ids,
                               int64_t pieces, const float *bias, const int64_t *starts, const int64_t *counts,
                               int64_t batch, const int64_t *sentences, float *out, int64_t N, int64_t K, int64_t D,
                               int64_t F, int64_t width, int32_t f32) {
    if (!sentences_fit(sentences, N, batch, starts, counts, pieces, F, width)) return 2;
    size_t rows, bytes; /* the queries as floats; sizes past the address space fail as malloc would */
    if (__builtin_mul_overflow((size_t)N, (size_t)K, &rows) ||
        __builtin_mul_overflow(rows, (size_t)D * sizeof(float), &bytes))
        return 1;
    float *work = malloc(bytes);
    if (!work) return 1;
    if (f32)
        sentence_logits(q, shared, weights, ids, bias, starts, counts, sentences, out, work, N, K, D, F, width, 1);
    else
        sentence_logits(q, shared, weights, ids, bias, starts, counts, sentences, out, work, N, K, D, F, width, 0);
    free(work);
    return 0;
}

/* decode_sentence_logits_int7: decode_sentence_logits for int8_fp32 on CPUs without VNNI, over the output
   projection's int8 weights: each row of q (N*K, D) float32 is quantized to 7 bits on its own scale
   (quantize_rows), each own token's logit is the exact int32 sum over its weight row, stored + 128 as
   unsigned bytes (weights (V, D), row ids[starts[n] + j]), scaled back as int8_product does: x the
   row's scale x the token's scale (scales (V,)) + bias. The shared logits (N*K, F) float32 are copied. Half
   the bytes of the bf16 kernel's weights, and vpmaddubsw's 32 products an instruction. Returns 1 where it
   cannot (a build without AVX2, D not a multiple of 32, scratch memory), 2 as decode_sentence_logits. */
#if defined(__AVX2__)
int32_t decode_sentence_logits_int7(const float *q, const float *shared, const uint8_t *weights, const float *scales,
                                    const int64_t *ids, int64_t pieces, const float *bias, const int64_t *starts,
                                    const int64_t *counts, int64_t batch, const int64_t *sentences, float *out,
                                    int64_t N, int64_t K, int64_t D, int64_t F, int64_t width) {
    if (D % 32) return 1;
    if (!sentences_fit(sentences, N, batch, starts, counts, pieces, F, width)) return 2;
    size_t rows, bytes;
    if (__builtin_mul_overflow((size_t)N, (size_t)K, &rows) || __builtin_mul_overflow(rows, (size_t)D, &bytes))
        return 1;
    int8_t *quantized = malloc(bytes ? bytes : 1);
    float *row_scales = malloc((rows ? rows : 1) * sizeof(float));
    int32_t *corrections = malloc((rows ? rows : 1) * sizeof(int32_t));
    if (!quantized || !row_scales || !corrections) {
        free(quantized), free(row_scales), free(corrections);
        return 1;
    }
    quantize_rows(q, quantized, row_scales, (int64_t)rows, D, 63.0f);
    unsigned_weight_corrections(quantized, corrections, (int64_t)rows, D);
    for (size_t r = 0; r < rows; r++) memcpy(out + r * width, shared + r * F, F * sizeof(float));
    const __m256i ones = _mm256_set1_epi16(1);
    for (int64_t s = 0; s < N; s++) {
        int64_t n = sentences[s], start = starts[n], count = counts[n];
        for (int64_t r0 = 0; r0 < K; r0 += 8) {
            int64_t block = K - r0 < 8 ? K - r0 : 8;
            const int8_t *qr = quantized + (s * K + r0) * D;
            for (int64_t j = 0; j < count; j++) {
                int64_t id = ids ? ids[start + j] : start + j;
                const uint8_t *w = weights + id * D;
                __m256i acc[8];
                for (int i = 0; i < 8; i++) acc[i] = _mm256_setzero_si256();
                for (int64_t d = 0; d < D; d += 32) {
                    __m256i wv = _mm256_loadu_si256((const __m256i *)(w + d));
                    for (int i = 0; i < 8; i++) {
                        if (i >= block) break;
                        __m256i x = _mm256_loadu_si256((const __m256i *)(qr + i * D + d));
                        acc[i] = _mm256_add_epi32(acc[i], _mm256_madd_epi16(_mm256_maddubs_epi16(wv, x), ones));
                    }
                }
                /* the 8 accumulators' sums in one vector (lane i: row r0 + i; rows past the block are 0) */
                __m256i pairs = _mm256_hadd_epi32(_mm256_hadd_epi32(acc[0], acc[1]), _mm256_hadd_epi32(acc[2], acc[3]));
                __m256i more = _mm256_hadd_epi32(_mm256_hadd_epi32(acc[4], acc[5]), _mm256_hadd_epi32(acc[6], acc[7]));
                __m256i totals = _mm256_add_epi32(_mm256_permute2x128_si256(pairs, more, 0x20),
                                                  _mm256_permute2x128_si256(pairs, more, 0x31));
                int32_t lanes[8];
                _mm256_storeu_si256((__m256i *)lanes, totals);
                for (int i = 0; i < block; i++) {
                    int64_t row = s * K + r0 + i;
                    float v = (float)(lanes[i] - corrections[row]);
                    v = v * row_scales[row];
                    v = v * scales[id];
                    if (bias) v = v + bias[id];
                    out[row * width + F + j] = v;
                }
            }
        }
        for (int64_t row = s * K; row < (s + 1) * K; row++)
            for (int64_t j = F + count; j < width; j++) out[row * width + j] = -__builtin_inff();
    }
    free(quantized), free(row_scales), free(corrections);
    return 0;
}
#else
int32_t decode_sentence_logits_int7(const float *q, const float *shared, const uint8_t *weights, const float *scales,
                                    const int64_t *ids, int64_t pieces, const float *bias, const int64_t *starts,
                                    const int64_t *counts, int64_t batch, const int64_t *sentences, float *out,
                                    int64_t N, int64_t K, int64_t D, int64_t F, int64_t width) {
    (void)q, (void)shared, (void)weights, (void)scales, (void)ids, (void)pieces, (void)bias, (void)starts;
    (void)counts, (void)batch, (void)sentences, (void)out, (void)N, (void)K, (void)D, (void)F, (void)width;
    return 1;
}
#endif
