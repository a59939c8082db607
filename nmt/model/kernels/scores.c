/* What a search step does with a step's logits: log-probabilities (decode_log_softmax, and a shortlist's as
   if over the whole vocabulary, decode_log_softmax_rest), and the best candidates (decode_best for greedy
   search, decode_beam_top_k for beam search). */

#include "common.h"

/* decode_log_softmax: log-probabilities (rows, width) float32 of logits (rows, width), bf16 or, with f32,
   float32: per row its maximum, the sum of exponentials and the output, three passes over one row (a few
   KB, in L1). Lanes past the row's end count as -inf. */
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
