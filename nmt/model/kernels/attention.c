/* A cached decoder step's attention over bf16 keys and values (nmt.model.native says why).

   decode_self_attention: one query per row and head, n = R*H of them, each over the T positions cached
   so far. q (n, D); keys, values (T, n, D) bf16, position-major and contiguous (nmt.model.cache); out (n, D).
   D % 16 == 0. q and out are bf16, or float32 where f32 is not 0 (a model with float32 activations over
   bf16 caches). Each entry point allocates its own scratch floats (`work`) and returns 0, or 1 where that
   allocation failed. Every loop streams the cache in memory order (position by position): W rows' dot
   products at once, reduced together; the softmax over positions W rows at a time. */

#include "common.h"

static inline void self_attention(const void *q, const uint16_t *keys, const uint16_t *values, void *out,
                                  float *work, int64_t T, int64_t n, int64_t D, float scale, int f32) {
    int64_t nw = round_up(n);
    float *qf = work, *scores = work + n * D, *acc = scores + T * nw; /* scores (T, nw) */
    for (int64_t i = 0; i < n * D; i += W) store(qf + i, load_rows(q, i, f32) * scale);
    for (int64_t t = 0; t < T; t++) {
        const uint16_t *k = keys + t * n * D;
        for (int64_t first = 0; first < n; first += W) {
            vf a[W];
            for (int j = 0; j < W; j++) {
                a[j] = splat(0.0f);
                if (first + j >= n) continue; /* lanes past the last row score 0 */
                const float *qr = qf + (first + j) * D;
                const uint16_t *kr = k + (first + j) * D;
                for (int64_t d = 0; d < D; d += W) a[j] += load(qr + d) * load_bf16(kr + d);
            }
            store(scores + t * nw + first, sums(a));
        }
    }
    for (int64_t first = 0; first < nw; first += W) { /* softmax over the positions, W rows at once */
        vf top = load(scores + first);
        for (int64_t t = 1; t < T; t++) top = vmax(top, load(scores + t * nw + first));
        vf total = splat(0.0f);
        for (int64_t t = 0; t < T; t++) {
            vf e = vexp(load(scores + t * nw + first) - top);
            store(scores + t * nw + first, e);
            total += e;
        }
        vf inverse = 1.0f / total;
        for (int64_t t = 0; t < T; t++) store(scores + t * nw + first, load(scores + t * nw + first) * inverse);
    }
    memset(acc, 0, sizeof(float) * n * D);
    for (int64_t t = 0; t < T; t++) {
        const uint16_t *v = values + t * n * D;
        const float *p = scores + t * nw;
        for (int64_t r = 0; r < n; r++)
            for (int64_t d = 0; d < D; d += W)
                store(acc + r * D + d, load(acc + r * D + d) + p[r] * load_bf16(v + r * D + d));
    }
    for (int64_t i = 0; i < n * D; i++) store_value(out, i, acc[i], f32);
}

/* decode_cross_attention: the K rows (beams) of each of N sentences over their sentence's encoder keys and
   values, the first lengths[s] of S positions (sources are padded at the end). q (N, K, H, D) bf16; keys,
   values (N, H, S, D) bf16; out (N, K, H, D) (the rows of the next product; q and out bf16 or, with f32,
   float32); work: K*SW + K*D floats, SW = S rounded up to W. D % 16 == 0. Each sentence's
   keys are read once for its K rows, W positions at a time. */
static inline void cross_attention(const void *q, const uint16_t *keys, const uint16_t *values,
                                   const int64_t *lengths, void *out, float *work, int64_t N, int64_t K, int64_t H,
                                   int64_t S, int64_t D, float scale, int f32) {
    int64_t sw = round_up(S);
    float *scores = work, *acc = work + K * sw; /* scores (K, sw); acc (K, D) */
    for (int64_t s = 0; s < N; s++) {
        int64_t length = lengths[s] < S ? lengths[s] : S;
        for (int64_t h = 0; h < H && length <= 0; h++) /* nothing to attend to: zeros */
            for (int64_t row = 0; row < K; row++)
                for (int64_t d = 0; d < D; d++) store_value(out, ((s * K + row) * H + h) * D + d, 0.0f, f32);
        for (int64_t h = 0; h < H && length > 0; h++) {
            const uint16_t *k = keys + (s * H + h) * S * D, *v = values + (s * H + h) * S * D;
            for (int64_t first = 0; first < length; first += W) {
                for (int64_t row = 0; row < K; row++) {
                    int64_t qr = ((s * K + row) * H + h) * D;
                    vf a[W];
                    for (int j = 0; j < W; j++) {
                        a[j] = splat(0.0f);
                        if (first + j >= length) continue;
                        for (int64_t d = 0; d < D; d += W) a[j] += load_rows(q, qr + d, f32) * load_bf16(k + (first + j) * D + d);
                    }
                    vf block = sums(a) * scale;
                    for (int j = 0; j < W; j++) /* positions past the source score -inf: weight 0 */
                        if (first + j >= length) block[j] = -__builtin_inff();
                    store(scores + row * sw + first, block);
                }
            }
            int64_t used = round_up(length);
            for (int64_t row = 0; row < K; row++) {
                float *p = scores + row * sw;
                vf top = load(p);
                for (int64_t first = W; first < used; first += W) top = vmax(top, load(p + first));
                float best = largest(top);
                vf total = splat(0.0f);
                for (int64_t first = 0; first < used; first += W) {
                    vf e = vexp(load(p + first) - best);
                    store(p + first, e);
                    total += e;
                }
                float inverse = 1.0f / total_of(total);
                for (int64_t d = 0; d < D; d += W) store(acc + row * D + d, splat(0.0f));
                for (int64_t l = 0; l < length; l++) {
                    float weight = p[l] * inverse;
                    for (int64_t d = 0; d < D; d += W)
                        store(acc + row * D + d, load(acc + row * D + d) + weight * load_bf16(v + l * D + d));
                }
            }
            for (int64_t row = 0; row < K; row++)
                for (int64_t d = 0; d < D; d++) store_value(out, ((s * K + row) * H + h) * D + d, acc[row * D + d], f32);
        }
    }
}

void attend_cached(const void *q, const uint16_t *keys, const uint16_t *values, void *out, float *work, int64_t T,
                   int64_t n, int64_t D, float scale, int32_t f32) {
    if (f32)
        self_attention(q, keys, values, out, work, T, n, D, scale, 1);
    else
        self_attention(q, keys, values, out, work, T, n, D, scale, 0);
}

void attend_source(const void *q, const uint16_t *keys, const uint16_t *values, const int64_t *lengths, void *out,
                   float *work, int64_t N, int64_t K, int64_t H, int64_t S, int64_t D, float scale, int32_t f32) {
    if (f32)
        cross_attention(q, keys, values, lengths, out, work, N, K, H, S, D, scale, 1);
    else
        cross_attention(q, keys, values, lengths, out, work, N, K, H, S, D, scale, 0);
}

int32_t decode_self_attention(const void *q, const uint16_t *keys, const uint16_t *values, void *out, int64_t T,
                              int64_t n, int64_t D, float scale, int32_t f32) {
    /* q scaled (n*D), scores (T*nw), acc (n*D) */
    float *work = malloc(sizeof(float) * (size_t)(2 * n * D + T * round_up(n)));
    if (!work) return 1;
    attend_cached(q, keys, values, out, work, T, n, D, scale, f32);
    free(work);
    return 0;
}

int32_t decode_cross_attention(const void *q, const uint16_t *keys, const uint16_t *values, const int64_t *lengths,
                               void *out, int64_t N, int64_t K, int64_t H, int64_t S, int64_t D, float scale,
                               int32_t f32) {
    float *work = malloc(sizeof(float) * (size_t)(K * round_up(S) + K * D)); /* scores, acc */
    if (!work) return 1;
    attend_source(q, keys, values, lengths, out, work, N, K, H, S, D, scale, f32);
    free(work);
    return 0;
}
