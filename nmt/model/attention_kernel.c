/* A cached decoder step's attention over bf16 keys and values, its log-softmax and its shortlist logits,
   for nmt.native (see there why).

   decode_self_attention: one query per row and head, n = R*H of them, each over the T positions cached
   so far. q (n, D); keys, values (T, n, D) bf16, position-major and contiguous (nmt.cache); out (n, D).
   D % 16 == 0. q and out are bf16, or float32 where f32 is not 0 (a model with float32 activations over
   bf16 caches). Each entry point allocates its own scratch floats (`work`) and returns 0, or 1 where that
   allocation failed.

   Every loop streams the cache in memory order (position by position) and computes in float32 vectors
   of W lanes (GCC/Clang vector extensions): 16 where the compiler targets AVX-512, else 8 (AVX2; SSE or
   NEON split them in two): W rows' dot products at once, reduced together; the softmax over positions W
   rows at a time. */

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

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

/* Queries and outputs are bf16 (bf16 activations) or float32 (float32 activations, int8_fp32): `f32`. */
static inline vf load_rows(const void *p, int64_t i, int f32) {
    return f32 ? load((const float *)p + i) : load_bf16((const uint16_t *)p + i);
}

static inline void store_value(void *p, int64_t i, float x, int f32) {
    if (f32)
        ((float *)p)[i] = x;
    else
        ((uint16_t *)p)[i] = to_bf16(x);
}

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

int32_t decode_self_attention(const void *q, const uint16_t *keys, const uint16_t *values, void *out, int64_t T,
                              int64_t n, int64_t D, float scale, int32_t f32) {
    /* q scaled (n*D), scores (T*nw), acc (n*D) */
    float *work = malloc(sizeof(float) * (size_t)(2 * n * D + T * round_up(n)));
    if (!work) return 1;
    if (f32)
        self_attention(q, keys, values, out, work, T, n, D, scale, 1);
    else
        self_attention(q, keys, values, out, work, T, n, D, scale, 0);
    free(work);
    return 0;
}

int32_t decode_cross_attention(const void *q, const uint16_t *keys, const uint16_t *values, const int64_t *lengths,
                               void *out, int64_t N, int64_t K, int64_t H, int64_t S, int64_t D, float scale,
                               int32_t f32) {
    float *work = malloc(sizeof(float) * (size_t)(K * round_up(S) + K * D)); /* scores, acc */
    if (!work) return 1;
    if (f32)
        cross_attention(q, keys, values, lengths, out, work, N, K, H, S, D, scale, 1);
    else
        cross_attention(q, keys, values, lengths, out, work, N, K, H, S, D, scale, 0);
    free(work);
    return 0;
}

/* decode_log_softmax: log-probabilities (rows, width) float32 of logits (rows, width), bf16 or, with f32,
   float32: per row its maximum, the sum of exponentials and the output, three passes over one row (a few
   KB, in L1). Lanes past the row's end count as -inf. */
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

static inline void log_softmax(const void *logits, float *out, float *shifts, int64_t rows, int64_t width, int f32) {
    int64_t whole = width / W * W, rest = width - whole;
    for (int64_t r = 0; r < rows; r++) {
        int64_t row = r * width;
        vf top = rest ? load_part(logits, row + whole, rest, f32) : splat(-__builtin_inff());
        for (int64_t i = 0; i < whole; i += W) top = vmax(top, load_rows(logits, row + i, f32));
        float best = largest(top);
        vf total = splat(0.0f);
        for (int64_t i = 0; i < whole; i += W) total += vexp(load_rows(logits, row + i, f32) - best);
        float sum = total_of(total);
        vf tail = load_part(logits, row + whole, rest, f32);
        for (int64_t j = 0; j < rest; j++) sum += expf(tail[j] - best);
        float shift = best + logf(sum);
        if (shifts) shifts[r] = shift;
        for (int64_t i = 0; i < whole; i += W) store(out + row + i, load_rows(logits, row + i, f32) - shift);
        for (int64_t j = 0; j < rest; j++) out[row + whole + j] = tail[j] - shift;
    }
}

void decode_log_softmax(const void *logits, float *out, int64_t rows, int64_t width, int32_t f32) {
    if (f32)
        log_softmax(logits, out, NULL, rows, width, 1);
    else
        log_softmax(logits, out, NULL, rows, width, 0);
}

/* decode_log_softmax_rest: the shortlist's log-probabilities as if normalized over the whole vocabulary
   (nmt.model.flat_decoder's less_the_rest) in one pass a row: logits (R, width) of each row's list, float32;
   the row's list mass L = logsumexp of its logits (decode_log_softmax's shift); the rest's mass
   M = logsumexp over the K sampled ids of sample[r * stride + j] + rest_bias[owners[r] * K + j] (rest_bias
   -inf where the sampled id is in the row's list); out = logits - L - softplus(M - L), softplus(x) =
   log1p(exp(x)), x above 20 as itself (torch's threshold). rest_bias has N rows. Returns 2, having written
   nothing, where an owner lies outside them, 1 where scratch memory fails. */
int32_t decode_log_softmax_rest(const float *logits, const float *sample, int64_t stride, const float *rest_bias,
                                const int64_t *owners, int64_t N, float *out, int64_t R, int64_t width, int64_t K) {
    for (int64_t r = 0; r < R; r++)
        if (owners[r] < 0 || owners[r] >= N) return 2;
    float *shifts = malloc((R > 0 ? (size_t)R : 1) * sizeof(float));
    if (!shifts) return 1;
    log_softmax(logits, out, shifts, R, width, 1);
    for (int64_t r = 0; r < R; r++) {
        const float *x = sample + r * stride, *bias = rest_bias + owners[r] * K;
        float top = -__builtin_inff();
        for (int64_t j = 0; j < K; j++) top = x[j] + bias[j] > top ? x[j] + bias[j] : top;
        float rest = -__builtin_inff();
        if (top > -__builtin_inff()) {
            float sum = 0.0f;
            for (int64_t j = 0; j < K; j++) sum += expf(x[j] + bias[j] - top);
            rest = top + logf(sum);
        }
        float d = rest - shifts[r];
        float correction = d > 20.0f ? d : log1pf(expf(d));
        for (int64_t i = 0; i < width; i++) out[r * width + i] -= correction;
    }
    free(shifts);
    return 0;
}

/* decode_beam_top_k: beam search's candidates of N sentences: for sentence s, the k best of scores[s * width + w]
   + log_probs[(s * width + w) * V + v] over its width rows w and the V tokens v, into values (N, k), best
   first, and indices (N, k) = w * V + v; of equal values the larger index first (as the glossary search
   sorts its candidates, nmt.decoding.constraints, and as torch.topk gave them); where fewer than k
   candidates exceed -inf, the rest are -inf at the smallest indices not taken. One pass over the rows, the
   largest of each 4 x W candidates against the k-th best so far (almost every block is rejected by one
   comparison); torch built the sums (a copy) and sorted chunks of them.
   k <= 64; returns 1 otherwise. */
int32_t decode_beam_top_k(const float *log_probs, const float *scores, float *values, int64_t *indices, int64_t N,
                          int64_t width, int64_t V, int64_t k) {
    if (k < 1 || k > 64 || k > width * V) return 1;
    for (int64_t s = 0; s < N; s++) {
        float *best = values + s * k;
        int64_t *at = indices + s * k;
        for (int64_t j = 0; j < k; j++) best[j] = -__builtin_inff(), at[j] = -1;
        for (int64_t w = 0; w < width; w++) {
            const float *row = log_probs + (s * width + w) * V;
            float score = scores[s * width + w];
            for (int64_t v0 = 0; v0 < V; v0 += 4 * W) {
                int64_t lanes = V - v0 < 4 * W ? V - v0 : 4 * W;
                if (lanes == 4 * W) { /* the block's largest candidate against the k-th best */
                    vf top = vmax(vmax(load(row + v0) + score, load(row + v0 + W) + score),
                                  vmax(load(row + v0 + 2 * W) + score, load(row + v0 + 3 * W) + score));
                    float m = largest(top);
                    if (!(m > best[k - 1] || (m == best[k - 1] && m > -__builtin_inff()))) continue;
                }
                for (int64_t v = v0; v < v0 + lanes; v++) {
                    float c = row[v] + score;
                    if (!(c > best[k - 1] || (c == best[k - 1] && c > -__builtin_inff()))) continue;
                    int64_t j = k - 1;
                    for (; j > 0 && c >= best[j - 1]; j--) best[j] = best[j - 1], at[j] = at[j - 1];
                    best[j] = c, at[j] = w * V + v;
                }
            }
        }
        for (int64_t j = 0, next = 0; j < k; j++) { /* no candidate above -inf: the smallest free indices */
            if (at[j] >= 0) continue;
            for (;; next++) {
                int taken = 0;
                for (int64_t i = 0; i < k; i++) taken |= at[i] == next;
                if (!taken) break;
            }
            at[j] = next++;
        }
    }
    return 0;
}

/* decode_best: each row's largest value of x (R, V) float32 and its index, as torch.max(x, dim=-1) gives them:
   the first index where several are equal, and a row's first NaN where it has one. A pass of W-lane maxima,
   then one to find where (the row is in cache by then). torch's max with indices read a greedy step's rows
   at about 1 GB/s: half a millisecond a step at batch 32. */
void decode_best(const float *x, float *values, int64_t *indices, int64_t R, int64_t V) {
    for (int64_t r = 0; r < R; r++) {
        const float *row = x + r * V;
        vf top = splat(-__builtin_inff());
        vi nan = {0};
        int64_t k = 0;
        for (; k + W <= V; k += W) {
            vf v = load(row + k);
            top = vmax(top, v);
            nan |= v != v;
        }
        float best = V >= W ? largest(top) : -__builtin_inff();
        int any_nan = 0;
        for (int j = 0; j < W; j++) any_nan |= nan[j] != 0;
        for (; k < V; k++) {
            any_nan |= row[k] != row[k];
            best = row[k] > best ? row[k] : best;
        }
        int64_t at = 0;
        if (any_nan) {
            while (row[at] == row[at]) at++;
        } else {
            while (at < V - 1 && row[at] != best) at++;
        }
        values[r] = row[at];
        indices[r] = at;
    }
}

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

/* quantize_rows: each row of x (R, K) float32 to integers in [-levels, levels] on a symmetric scale of its
   own, max |x| / levels (at least 1e-30): q = x / scale rounded to the nearest (ties to even, as
   torch.round), scales (R,). One row at a time, every element by the same operations: a row's result does
   not depend on the others. Written as int8 to q (R, K). */
static inline void quantize_rows(const float *x, int8_t *q, float *scales, int64_t R, int64_t K, float levels) {
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

/* quantize_rows_int8: quantize_rows to [-127, 127], int8 out. */
void quantize_rows_int8(const float *x, int8_t *q, float *scales, int64_t R, int64_t K) {
    quantize_rows(x, q, scales, R, K, 127.0f);
}

/* scale_products: int32 products (R, N) of rows quantized by quantize_rows and int8 weights, back to float32
   in place (out may be the products' own memory): products x the row's scale x the column's scale, plus
   bias (N,) if not NULL, then a ReLU if relu. */
static inline void scale_products(const int32_t *products, const float *row_scales, const float *column_scales,
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

void scale_int8_products(const int32_t *products, const float *row_scales, const float *column_scales,
                         const float *bias, float *out, int64_t R, int64_t N, int32_t relu) {
    scale_products(products, row_scales, column_scales, bias, out, R, N, relu);
}

/* 128 x the sum of each of R int8 rows (R, K): what a product of the rows by weights stored + 128 as unsigned
   bytes holds beyond the products by the signed weights. */
static inline void unsigned_weight_corrections(const int8_t *rows, int32_t *out, int64_t R, int64_t K) {
    for (int64_t r = 0; r < R; r++) {
        int32_t sum = 0;
        for (int64_t k = 0; k < K; k++) sum += rows[r * K + k];
        out[r] = 128 * sum;
    }
}

/* int8_few_rows_products: int32 products (R, N) of R int8 rows (R, K), R <= 8, and int8 weights packed by
   nmt.model.quantize.vnni_pack: for each block of 16 weight rows and each 4 of the K columns, 64 bytes,
   the 16 rows' 4 values + 128 as unsigned bytes (weight rows past N are padding). Each block of weights is
   read once for all the rows: vpdpbusd multiplies it by 4 bytes of a row broadcast to every lane, which
   leaves each lane the sum of its own weight row (no sums across lanes); less 128 x the row's sum.
   For the few rows of a decoding step at batch 1 or 2 (a beam of 1-8), where a GEMM library's int8 kernel
   is slow. The products are exact int32 sums, the same whichever kernel computes them. Returns 1 where it
   cannot (a build without AVX-512 VNNI, K not a multiple of 4, R outside 1-8). */
#if defined(__AVX512VNNI__) && defined(__AVX512BW__) && W == 16
#include <immintrin.h>

int32_t int8_few_rows_products(const int8_t *rows, const uint8_t *packed, int32_t *out, int64_t R, int64_t N,
                               int64_t K) {
    if (K % 4 || R < 1 || R > 8) return 1;
    int64_t groups = K / 4;
    int32_t sums[8];
    unsigned_weight_corrections(rows, sums, R, K);
    for (int64_t n0 = 0; n0 < N; n0 += 16) {
        const uint8_t *block = packed + n0 / 16 * groups * 64;
        __m512i acc[8];
        for (int r = 0; r < 8; r++) acc[r] = _mm512_setzero_si512();
        for (int64_t g = 0; g < groups; g++) {
            __m512i w = _mm512_loadu_si512(block + g * 64);
            for (int r = 0; r < 8; r++) {
                if (r >= R) break;
                int32_t four;
                memcpy(&four, rows + r * K + g * 4, sizeof four);
                acc[r] = _mm512_dpbusd_epi32(acc[r], w, _mm512_set1_epi32(four));
            }
        }
        __mmask16 valid = N - n0 >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (N - n0)) - 1);
        for (int r = 0; r < R; r++)
            _mm512_mask_storeu_epi32(out + r * N + n0, valid, _mm512_sub_epi32(acc[r], _mm512_set1_epi32(sums[r])));
    }
    return 0;
}
#else
int32_t int8_few_rows_products(const int8_t *rows, const uint8_t *packed, int32_t *out, int64_t R, int64_t N,
                               int64_t K) {
    (void)rows, (void)packed, (void)out, (void)R, (void)N, (void)K;
    return 1;
}
#endif

/* int7_rows_products: int8_few_rows_products for rows quantized by quantize_rows to [-63, 63], with
   AVX2 alone, and any number of rows: vpmaddubsw multiplies a block's unsigned weight bytes by 4 bytes of a
   row broadcast to every lane and sums pairs in 16 bits (at most 2 x 255 x 63, no saturation), vpmaddwd sums
   those pairs into each lane's int32; less 128 x the row's sum. Each block of 16 weight rows (K x 16 bytes,
   in L1 or L2) is read once for every 8 rows, the rows' count a constant of the inner loop (1-8): 68-79
   billion multiply-adds a second at 160 rows on a Zen 3 core, above fbgemm's 64-69; blocks of 4 rows, whose
   accumulators fit the 16 registers, ran at 61-66. The same exact int32 products as any other kernel.
   Returns 1 where it cannot (a build without AVX2, K not a multiple of 4, R < 1), 2 where scratch memory
   fails. */
#if defined(__AVX2__)
#include <immintrin.h>

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

int32_t int7_rows_products(const int8_t *rows, const uint8_t *packed, int32_t *out, int64_t R, int64_t N,
                           int64_t K) {
    if (K % 4 || R < 1) return 1;
    int32_t *sums = malloc((size_t)R * sizeof(int32_t));
    if (!sums) return 2;
    unsigned_weight_corrections(rows, sums, R, K);
    for (int64_t n0 = 0; n0 < N; n0 += 16) {
        const uint8_t *block = packed + n0 / 16 * (K / 4) * 64;
        for (int64_t r0 = 0; r0 < R; r0 += 8) {
            const int8_t *eight = rows + r0 * K;
            int32_t *at = out + r0 * N;
            switch (R - r0 < 8 ? R - r0 : 8) {
            case 1: int7_block_rows(1, eight, block, sums + r0, at, N, K, n0); break;
            case 2: int7_block_rows(2, eight, block, sums + r0, at, N, K, n0); break;
            case 3: int7_block_rows(3, eight, block, sums + r0, at, N, K, n0); break;
            case 4: int7_block_rows(4, eight, block, sums + r0, at, N, K, n0); break;
            case 5: int7_block_rows(5, eight, block, sums + r0, at, N, K, n0); break;
            case 6: int7_block_rows(6, eight, block, sums + r0, at, N, K, n0); break;
            case 7: int7_block_rows(7, eight, block, sums + r0, at, N, K, n0); break;
            default: int7_block_rows(8, eight, block, sums + r0, at, N, K, n0); break;
            }
        }
    }
    free(sums);
    return 0;
}
#else
int32_t int7_rows_products(const int8_t *rows, const uint8_t *packed, int32_t *out, int64_t R, int64_t N,
                           int64_t K) {
    (void)rows, (void)packed, (void)out, (void)R, (void)N, (void)K;
    return 1;
}
#endif

/* int7_rows_linear: an int8 layer on float32 rows for CPUs without VNNI, in one call: x (R, K) -> out (R, N)
   float32, each row quantized to [-63, 63] on its own scale (quantize_rows), times the int8 weights packed by
   vnni_pack (int7_rows_products: exact int32 sums), scaled back by the row's and the output channels' scales
   (N,), plus bias (N,) if not NULL, then a ReLU if relu (scale_products). out's memory holds the products in
   between. A row's result is what it would be alone. Returns 1 where int7_rows_products cannot, 2 where
   scratch memory fails. */
int32_t int7_rows_linear(const float *x, const uint8_t *packed, const float *column_scales, const float *bias,
                         float *out, int64_t R, int64_t N, int64_t K, int32_t relu) {
    if (K % 4 || R < 1) return 1;
    int8_t *q = malloc((size_t)R * (size_t)K);
    float *scales = malloc((size_t)R * sizeof(float));
    if (!q || !scales) {
        free(q), free(scales);
        return 2;
    }
    quantize_rows(x, q, scales, R, K, 63.0f);
    int32_t failed = int7_rows_products(q, packed, (int32_t *)out, R, N, K);
    if (!failed) scale_products((const int32_t *)out, scales, column_scales, bias, out, R, N, relu);
    free(q), free(scales);
    return failed;
}

/* decode_sentence_logits_int7: decode_sentence_logits for int8_fp32 on CPUs without VNNI, over the output
   projection's int8 weights: each row of q (N*K, D) float32 is quantized to 7 bits on its own scale
   (quantize_rows), each own token's logit is the exact int32 sum over its weight row, stored + 128 as
   unsigned bytes (weights (V, D), row ids[starts[n] + j]), scaled back as scale_int8_products does: x the
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

/* rows_linear: an int8 layer of int8_fp32 on float32 rows x (R, K) -> out (R, N): each row quantized on its own
   scale (to 7 bits with bits == 7, AVX2; else 8, VNNI), multiplied 8 rows at a time by the weights `w`
   (packed by vnni_pack, then the channels' scales (N,), then the bias (N,) or NULL), scaled back, ReLU if
   relu: the same floats as int7_rows_linear (or quantize_rows_int8, int8_few_rows_products and
   scale_int8_products, and torch._int_mm's exact products where it takes more than 8 rows).
   q: R x K bytes and row_scales: R floats of scratch. Returns 1 where the products kernel cannot. */
static int32_t rows_linear(const float *x, const void *const *w, float *out, int8_t *q, float *row_scales, int64_t R,
                           int64_t N, int64_t K, int32_t relu, int32_t bits) {
    quantize_rows(x, q, row_scales, R, K, bits == 7 ? 63.0f : 127.0f);
    for (int64_t first = 0; first < R; first += 8) { /* 8 rows at a time: they stay in L1 */
        int64_t rows = R - first < 8 ? R - first : 8;
        int32_t *products = (int32_t *)out + first * N;
        int32_t failed = bits == 7 ? int7_rows_products(q + first * K, w[0], products, rows, N, K)
                                   : int8_few_rows_products(q + first * K, w[0], products, rows, N, K);
        if (failed) return failed;
    }
    scale_products((const int32_t *)out, row_scales, w[1], w[2], out, R, N, relu);
    return 0;
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
    return rows_linear(in, w, out, s->q, s->row_scales, s->R, N, K, relu, s->bits);
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
   tokens in, the last layer's output out. weights: LAYER_POINTERS per layer: packed weights, scales and
   bias of self q, self kv, self out, cross q, cross out, up, down (rows_linear), then the weight and bias of
   the self, cross and feed-forward norms. self_cache: the layer's self keys then values, (capacity, R, H, Dh)
   bf16, this step's keys and values written at position `step` (rounded as torch rounds to bf16);
   cross_cache: the layer's cross keys then values (N, H, S, Dh) bf16, each source's lengths[n] tokens first.
   The attention is decode_self_attention's and decode_cross_attention's, the norms decode_layer_norm's:
   each row's result is what it would be alone. Returns 1 where a products kernel cannot (bits 8 on a build
   without VNNI), 2 where scratch memory fails. */
enum { SELF_Q, SELF_KV, SELF_OUT, CROSS_Q, CROSS_OUT, FFN_UP, FFN_DOWN, LINEARS };
#define LAYER_POINTERS (3 * LINEARS + 6)

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
        const void *const *w = weights + l * LAYER_POINTERS, *const *norms = w + 3 * LINEARS;
        const float *in = sublayer_in(&s, x, norms); /* self-attention */
        failed |= linear_rows(&s, in, w + 3 * SELF_Q, s.queries, D, D, 0);
        failed |= linear_rows(&s, in, w + 3 * SELF_KV, s.kv, 2 * D, D, 0);
        uint16_t *keys = self_cache[2 * l], *values = self_cache[2 * l + 1];
        for (int64_t r = 0; r < R; r++)
            for (int64_t i = 0; i < D; i++) {
                keys[(step * R + r) * D + i] = to_bf16(s.kv[r * 2 * D + i]);
                values[(step * R + r) * D + i] = to_bf16(s.kv[r * 2 * D + D + i]);
            }
        self_attention(s.queries, keys, values, s.attended, s.extra, T, n, Dh, scale, 1);
        failed |= linear_rows(&s, s.attended, w + 3 * SELF_OUT, s.h, D, D, 0);
        sublayer_out(&s, x, norms);
        in = sublayer_in(&s, x, norms + 2); /* cross-attention */
        failed |= linear_rows(&s, in, w + 3 * CROSS_Q, s.queries, D, D, 0);
        cross_attention(s.queries, cross_cache[2 * l], cross_cache[2 * l + 1], lengths, s.attended, s.extra, N, K, H,
                        S, Dh, scale, 1);
        failed |= linear_rows(&s, s.attended, w + 3 * CROSS_OUT, s.h, D, D, 0);
        sublayer_out(&s, x, norms + 2);
        failed |= feed_forward(&s, x, w + 3 * FFN_UP, w + 3 * FFN_DOWN, norms + 4);
    }
    rows_free(&s);
    return failed ? 1 : 0;
}

/* encode_layers: every encoder layer of an int8_fp32 model over N sources of S tokens each, none of them
   padding (the flat decoder encodes each length apart), in one call. x (N*S, D) float32, the embedded
   sources in, the last layer's output out (before the final norm). weights: ENCODER_POINTERS per layer: q,
   kv, out, ffn up, ffn down (rows_linear's three pointers each), then the weight and bias of the attention
   and feed-forward norms. Each query attends to its source's S positions in float32: scores x scale,
   softmax, weighted sum of values. A source's result does not depend on the others. Returns as
   decode_layers. */
enum { ENCODER_Q, ENCODER_KV, ENCODER_OUT, ENCODER_UP, ENCODER_DOWN, ENCODER_LINEARS };
#define ENCODER_POINTERS (3 * ENCODER_LINEARS + 4)

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
        const void *const *w = weights + l * ENCODER_POINTERS, *const *norms = w + 3 * ENCODER_LINEARS;
        const float *in = sublayer_in(&s, x, norms);
        failed |= linear_rows(&s, in, w + 3 * ENCODER_Q, s.queries, D, D, 0);
        failed |= linear_rows(&s, in, w + 3 * ENCODER_KV, s.kv, 2 * D, D, 0);
        source_attention(s.queries, s.kv, s.attended, s.extra, N, S, H, Dh, scale);
        failed |= linear_rows(&s, s.attended, w + 3 * ENCODER_OUT, s.h, D, D, 0);
        sublayer_out(&s, x, norms);
        failed |= feed_forward(&s, x, w + 3 * ENCODER_UP, w + 3 * ENCODER_DOWN, norms + 2);
    }
    rows_free(&s);
    return failed ? 1 : 0;
}
