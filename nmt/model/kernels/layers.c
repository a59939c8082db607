/* Whole layer stacks of an int8_fp32 model in one call (decode_layers, encode_layers; at batch 1 a decoder
   step was some hundred small operations, whose calls from Python cost more than their work), and the layer
   norm they and the flat decoder's step share (decode_layer_norm). */

#include "common.h"

/* a layer's weight `which` (its POINTERS_PER_WEIGHT pointers) among the layer's pointers w */
#define AT(w, which) ((w) + (which) * POINTERS_PER_WEIGHT)

/* decode_layer_norm: torch.layer_norm of each row of x (R, D) float32 with weight and bias (D,) into out (which
   may be x): (x - mean) / sqrt(variance + eps) x weight + bias, the mean and the (biased) variance in float32
   vectors. Row by row: a row's result does not depend on the others. decode_layers normalizes with it, and
   so does the flat decoder's step where it does not call decode_layers, so that both give the same floats. */
static inline void layer_norm(const float *x, const float *weight, const float *bias, float *out, int64_t R,
                              int64_t D, float eps) {
    for (int64_t r = 0; r < R; r++) {
        const float *row = x + r * D;
        float *o = out + r * D;
        /* Centred on the row's first value, then on the mean of the differences: x - shift is exact where x is
           near shift, and the mean of the differences is small, so a row with a large mean and a small spread
           loses nothing to the mean's rounding (which in float32 is spread-sized there: ulp(mean) / spread). */
        float shift = row[0];
        vf acc = splat(0.0f);
        int64_t k = 0;
        for (; k + W <= D; k += W) acc += load(row + k) - shift;
        float sum = total_of(acc);
        for (; k < D; k++) sum += row[k] - shift;
        float mean = sum / (float)D; /* of x - shift */
        vf squares = splat(0.0f);
        for (k = 0; k + W <= D; k += W) {
            vf d = (load(row + k) - shift) - mean;
            squares += d * d;
        }
        float variance = total_of(squares);
        for (; k < D; k++) variance += ((row[k] - shift) - mean) * ((row[k] - shift) - mean);
        float inverse = 1.0f / sqrtf(variance / (float)D + eps);
        for (k = 0; k + W <= D; k += W)
            store(o + k, ((load(row + k) - shift) - mean) * inverse * load(weight + k) + load(bias + k));
        for (; k < D; k++) o[k] = ((row[k] - shift) - mean) * inverse * weight[k] + bias[k];
    }
}

void decode_layer_norm(const float *x, const float *weight, const float *bias, float *out, int64_t R, int64_t D,
                       float eps) {
    layer_norm(x, weight, bias, out, R, D, eps);
}

/* a x b x c, or SIZE_MAX where it overflows (a malloc of it then fails) */
static inline size_t product_or_max(int64_t a, int64_t b, int64_t c) {
    size_t ab, abc;
    if (a < 0 || b < 0 || c < 0 || __builtin_mul_overflow((size_t)a, (size_t)b, &ab)
        || __builtin_mul_overflow(ab, (size_t)c, &abc))
        return SIZE_MAX;
    return abc;
}

static inline void add_rows(float *x, const float *y, int64_t count) {
    int64_t i = 0;
    for (; i + W <= count; i += W) store(x + i, load(x + i) + load(y + i));
    for (; i < count; i++) x[i] += y[i];
}

/* What decode_layers and encode_layers share: the scratch of their R rows of width D (hidden F), and the
   steps of a sublayer around its work (its input, norm first in pre-norm; the residual, norm after in
   post-norm), the same operations in both. */
typedef struct {
    float *h, *kv, *queries, *attended, *up, *row_scales, *extra; /* (R, D), (R, 2D), (R, D) x 2, (R, F), (R,) */
    int8_t *q;                                                   /* (R, max(D, F)): quantized rows */
    int64_t R, D, F;
    float eps;
    int32_t pre_norm, bits;
} Rows;

/* Allocate a Rows' scratch with `extra` floats more (at extra); 2 where it fails. R <= 2^30, D <= 2^30 and
   F <= 2^24, checked by the callers, keep every size below 2^63. */
static int32_t rows_scratch(Rows *s, size_t extra) {
    int64_t R = s->R, D = s->D, F = s->F, widest = F > D ? F : D;
    size_t floats = product_or_max(R, 5 * D + F + 1, 1) + extra;
    float *scratch = floats < SIZE_MAX / 8 ? malloc(floats * sizeof(float)) : NULL;
    s->q = malloc((size_t)R * (size_t)widest);
    if (!scratch || !s->q) {
        free(scratch), free(s->q);
        return 2;
    }
    s->h = scratch, s->kv = s->h + R * D, s->queries = s->kv + 2 * R * D, s->attended = s->queries + R * D;
    s->up = s->attended + R * D, s->row_scales = s->up + R * F, s->extra = s->row_scales + R;
    return 0;
}

static void rows_free(Rows *s) { free(s->h), free(s->q); }

static int32_t linear_rows(const Rows *s, const float *in, const void *const *w, float *out, int64_t N, int64_t K,
                           int32_t relu) {
    return int8_product(in, w[0], w[1], w[2], out, s->q, s->row_scales, s->R, N, K, relu, s->bits);
}

/* A sublayer's input: x, or (pre-norm) its norm (norm: weight, bias) in s->h. */
static const float *sublayer_in(const Rows *s, const float *x, const void *const *norm) {
    if (!s->pre_norm) return x;
    layer_norm(x, norm[0], norm[1], s->h, s->R, s->D, s->eps);
    return s->h;
}

/* x += the sublayer's output (in s->h), then (post-norm) x = its norm. */
static void sublayer_out(const Rows *s, float *x, const void *const *norm) {
    add_rows(x, s->h, s->R * s->D);
    if (!s->pre_norm) layer_norm(x, norm[0], norm[1], x, s->R, s->D, s->eps);
}

/* The feed-forward sublayer: up (and ReLU), down, with its input and residual steps. */
static int32_t feed_forward(const Rows *s, float *x, const void *const *up, const void *const *down,
                            const void *const *norm) {
    const float *in = sublayer_in(s, x, norm);
    int32_t failed = linear_rows(s, in, up, s->up, s->F, s->D, 1);
    failed |= linear_rows(s, s->up, down, s->h, s->D, s->F, 0);
    sublayer_out(s, x, norm);
    return failed;
}

/* decode_layers: one cached decoding step through every decoder layer of an int8_fp32 model, in one call
   (nmt.model.transformer.decoder_step: at batch 1 a step is some hundred small operations, and their calls
   from Python cost more than their work). x (R, D) float32, R = N*K rows (K per sentence), the embedded
   tokens in, the last layer's output out. weights: DECODER_WEIGHTS x POINTERS_PER_WEIGHT per layer, in the
   order of enum nmt_decoder_weight (nmt_kernels.h): a linear layer's packed weights, scales and bias
   (int8_product), a norm's weight and bias. self_cache: the layer's self keys then values, (capacity, R, H, Dh)
   bf16, this step's keys and values written at position `step` (rounded as torch rounds to bf16);
   cross_cache: the layer's cross keys then values (N, H, S, Dh) bf16, each source's lengths[n] tokens first.
   The attention is decode_self_attention's and decode_cross_attention's, the norms decode_layer_norm's:
   each row's result is what it would be alone. Returns 1 where a products kernel cannot (bits 8 on a build
   without VNNI), 2 where scratch memory fails. */

int32_t decode_layers(float *x, const void *const *weights, int64_t L, uint16_t *const *self_cache, int64_t step,
                      const uint16_t *const *cross_cache, const int64_t *lengths, int64_t N, int64_t K, int64_t H,
                      int64_t Dh, int64_t F, int64_t S, float scale, float eps, int32_t pre_norm, int32_t bits) {
    if (N < 1 || K < 1 || H < 1 || Dh < 1 || F < 1 || S < 1 || step < 0 || N > (1 << 30) / K || Dh > (1 << 20)
        || H > (1 << 10) || F > (1 << 24) || S > (1 << 24) || step > (1 << 24))
        return 2; /* sizes no model has: their scratch would not fit in memory */
    int64_t R = N * K, D = H * Dh, T = step + 1, n = R * H;
    size_t self_work = product_or_max(2 * n, Dh, 1) + product_or_max(T, round_up(n), 1);
    size_t cross_work = product_or_max(K, round_up(S) + Dh, 1);
    Rows s = {.R = R, .D = D, .F = F, .eps = eps, .pre_norm = pre_norm, .bits = bits};
    if (rows_scratch(&s, self_work > cross_work ? self_work : cross_work)) return 2;
    int32_t failed = 0;
    for (int64_t l = 0; l < L && !failed; l++) {
        const void *const *w = weights + l * DECODER_WEIGHTS * POINTERS_PER_WEIGHT;
        const float *in = sublayer_in(&s, x, AT(w, SELF_NORM)); /* self-attention */
        failed |= linear_rows(&s, in, AT(w, SELF_Q), s.queries, D, D, 0);
        failed |= linear_rows(&s, in, AT(w, SELF_KV), s.kv, 2 * D, D, 0);
        uint16_t *keys = self_cache[2 * l], *values = self_cache[2 * l + 1];
        for (int64_t r = 0; r < R; r++)
            for (int64_t i = 0; i < D; i++) {
                keys[(step * R + r) * D + i] = to_bf16(s.kv[r * 2 * D + i]);
                values[(step * R + r) * D + i] = to_bf16(s.kv[r * 2 * D + D + i]);
            }
        attend_cached(s.queries, keys, values, s.attended, s.extra, T, n, Dh, scale, 1);
        failed |= linear_rows(&s, s.attended, AT(w, SELF_OUT), s.h, D, D, 0);
        sublayer_out(&s, x, AT(w, SELF_NORM));
        in = sublayer_in(&s, x, AT(w, CROSS_NORM)); /* cross-attention */
        failed |= linear_rows(&s, in, AT(w, CROSS_Q), s.queries, D, D, 0);
        attend_source(s.queries, cross_cache[2 * l], cross_cache[2 * l + 1], lengths, s.attended, s.extra, N, K, H,
                        S, Dh, scale, 1);
        failed |= linear_rows(&s, s.attended, AT(w, CROSS_OUT), s.h, D, D, 0);
        sublayer_out(&s, x, AT(w, CROSS_NORM));
        failed |= feed_forward(&s, x, AT(w, FFN_UP), AT(w, FFN_DOWN), AT(w, FFN_NORM));
    }
    rows_free(&s);
    return failed ? 1 : 0;
}

/* encode_layers: every encoder layer of an int8_fp32 model over N sources of S tokens each, none of them
   padding (the flat decoder encodes each length apart), in one call. x (N*S, D) float32, the embedded
   sources in, the last layer's output out (before the final norm). weights: ENCODER_WEIGHTS x
   POINTERS_PER_WEIGHT per layer, in the order of enum nmt_encoder_weight, as decode_layers'. Each query attends
   to its source's S positions in float32: scores x scale, softmax, weighted sum of values. A source's result
   does not depend on the others. Returns as decode_layers. */

static void source_attention(const float *queries, const float *kv, float *out, float *scores, int64_t N, int64_t S,
                             int64_t H, int64_t Dh, float scale) {
    int64_t D = H * Dh;
    for (int64_t n = 0; n < N; n++)
        for (int64_t h = 0; h < H; h++)
            for (int64_t i = 0; i < S; i++) {
                const float *q = queries + (n * S + i) * D + h * Dh;
                float top = -__builtin_inff();
                for (int64_t j = 0; j < S; j++) {
                    const float *k = kv + (n * S + j) * 2 * D + h * Dh;
                    vf acc = splat(0.0f);
                    for (int64_t d = 0; d < Dh; d += W) acc += load(q + d) * load(k + d);
                    scores[j] = total_of(acc) * scale;
                    top = scores[j] > top ? scores[j] : top;
                }
                float total = 0.0f;
                for (int64_t j = 0; j < S; j++) total += scores[j] = expf(scores[j] - top);
                float inverse = 1.0f / total;
                float *o = out + (n * S + i) * D + h * Dh;
                for (int64_t d = 0; d < Dh; d += W) {
                    vf acc = splat(0.0f);
                    for (int64_t j = 0; j < S; j++) acc += scores[j] * load(kv + (n * S + j) * 2 * D + D + h * Dh + d);
                    store(o + d, acc * inverse);
                }
            }
}

int32_t encode_layers(float *x, const void *const *weights, int64_t L, int64_t N, int64_t S, int64_t H, int64_t Dh,
                      int64_t F, float scale, float eps, int32_t pre_norm, int32_t bits) {
    if (N < 1 || S < 1 || H < 1 || Dh < 1 || F < 1 || N > (1 << 30) / S || Dh > (1 << 20) || H > (1 << 10)
        || F > (1 << 24))
        return 2; /* sizes no model has: their scratch would not fit in memory */
    int64_t D = H * Dh;
    Rows s = {.R = N * S, .D = D, .F = F, .eps = eps, .pre_norm = pre_norm, .bits = bits};
    if (rows_scratch(&s, (size_t)S)) return 2; /* extra: one query's scores */
    int32_t failed = 0;
    for (int64_t l = 0; l < L && !failed; l++) {
        const void *const *w = weights + l * ENCODER_WEIGHTS * POINTERS_PER_WEIGHT;
        const float *in = sublayer_in(&s, x, AT(w, ENCODER_ATTENTION_NORM));
        failed |= linear_rows(&s, in, AT(w, ENCODER_Q), s.queries, D, D, 0);
        failed |= linear_rows(&s, in, AT(w, ENCODER_KV), s.kv, 2 * D, D, 0);
        source_attention(s.queries, s.kv, s.attended, s.extra, N, S, H, Dh, scale);
        failed |= linear_rows(&s, s.attended, AT(w, ENCODER_OUT), s.h, D, D, 0);
        sublayer_out(&s, x, AT(w, ENCODER_ATTENTION_NORM));
        failed |= feed_forward(&s, x, AT(w, ENCODER_FFN_UP), AT(w, ENCODER_FFN_DOWN), AT(w, ENCODER_FFN_NORM));
    }
    rows_free(&s);
    return failed ? 1 : 0;
}
