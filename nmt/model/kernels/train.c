/* What a training step on a CPU does in one pass where torch takes several: dropout with masks drawn from a
   counter-based hash (nothing stored for backward: the same seed draws the same mask again), and the loss's
   softmax cross-entropy with its gradient (nmt.model.loss). */

#include "common.h"

/* A 32-bit integer hash with low bias (C. Wellons' "lowbias32"): every input bit moves every output bit. */
static inline vu mix(vu x) {
    x ^= x >> 16;
    x *= 0x7feb352du;
    x ^= x >> 15;
    x *= 0x846ca68bu;
    x ^= x >> 16;
    return x;
}

/* The 16-bit draws of the elements whose indices (below 2^32) are `index`, under `seed`: two rounds of the hash,
   over the index and the seed's low half, then the seed's high half; the upper half of the result. */
static inline vu draws(vu index, uint64_t seed) {
    return mix(mix(index ^ (uint32_t)seed) + (uint32_t)(seed >> 32)) >> 16;
}

/* train_dropout: out[i] = x[i] * scale where the draw of element first + i (16 bits under the seed *seed_at, read
   from memory: the caller keeps it in a tensor) is at least `dropped`, else 0; x and out n bf16 values, or float32
   with f32 (out may be x); first + n at most 2^32. Computed in float32, rounded to bf16 once. The same seed and
   first give the same mask: backward calls it on the gradient. */
void train_dropout(const void *x, void *out, int64_t n, int64_t first, const int64_t *seed_at, int32_t dropped,
                   float scale, int32_t f32) {
    uint64_t seed = (uint64_t)*seed_at;
    vu threshold = {0}, index = {0};
    threshold += (uint32_t)dropped;
    for (int j = 0; j < W; j++) index[j] = (uint32_t)first + (uint32_t)j;
    int64_t whole = n / W * W;
    for (int64_t i = 0; i < whole; i += W, index += W) {
        vi keep = draws(index, seed) >= threshold;
        vf v = load_rows(x, i, f32) * scale, kept;
        vi bits;
        memcpy(&bits, &v, sizeof bits);
        bits &= keep;
        memcpy(&kept, &bits, sizeof kept);
        store_rows(out, i, kept, f32);
    }
    if (whole < n) {
        vu tail = draws(index, seed);
        vf v = load_part(x, whole, n - whole, f32);
        for (int64_t j = 0; j < n - whole; j++)
            store_value(out, whole + j, tail[j] >= (uint32_t)dropped ? v[j] * scale : 0.0f, f32);
    }
}

/* The value at position i of a row, float32 */
static inline float value_at(const void *p, int64_t i, int f32) {
    if (f32) return ((const float *)p)[i];
    uint32_t u = (uint32_t)((const uint16_t *)p)[i] << 16;
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* train_cross_entropy: label-smoothed cross-entropy of logits (rows, width), bf16 or float32 with f32, against
   targets (rows,): per row with lse = log(sum(exp(logits))), (1 - smoothing) (lse - logits[target]) +
   smoothing (lse - mean(logits)); rows whose target is `pad` count 0. Writes each row's loss to losses (rows,)
   float32, and, unless grad is NULL, the loss's gradient with respect to the logits in their dtype:
   softmax - smoothing / width, less 1 - smoothing at the target; 0 on padding rows. Three passes over a row
   (its maximum and sum, the sum of exponentials, the gradient). Returns 2, having written nothing, where a
   target lies outside 0 .. width - 1. */
int32_t train_cross_entropy(const void *logits, const int64_t *targets, float *losses, void *grad, int64_t rows,
                            int64_t width, int64_t pad, float smoothing, int32_t f32) {
    for (int64_t r = 0; r < rows; r++)
        if (targets[r] != pad && (targets[r] < 0 || targets[r] >= width)) return 2;
    int64_t whole = width / W * W, rest = width - whole;
    float uniform = smoothing / (float)width;
    for (int64_t r = 0; r < rows; r++) {
        const int64_t row = r * width;
        if (targets[r] == pad) {
            losses[r] = 0.0f;
            if (grad) memset((char *)grad + row * (f32 ? 4 : 2), 0, (size_t)width * (f32 ? 4 : 2));
            continue;
        }
        vf top = splat(-__builtin_inff()), sum = splat(0.0f);
        for (int64_t i = 0; i < whole; i += W) {
            vf v = load_rows(logits, row + i, f32);
            top = vmax(top, v);
            sum += v;
        }
        float best = largest(top), total = total_of(sum);
        for (int64_t j = 0; j < rest; j++) {
            float v = value_at(logits, row + whole + j, f32);
            best = v > best ? v : best;
            total += v;
        }
        vf exps = splat(0.0f);
        for (int64_t i = 0; i < whole; i += W) exps += vexp(load_rows(logits, row + i, f32) - best);
        float exp_sum = total_of(exps);
        for (int64_t j = 0; j < rest; j++) exp_sum += expf(value_at(logits, row + whole + j, f32) - best);
        float lse = best + logf(exp_sum);
        int64_t target = targets[r];
        losses[r] = (1.0f - smoothing) * (lse - value_at(logits, row + target, f32)) +
                    smoothing * (lse - total / (float)width);
        if (!grad) continue;
        for (int64_t i = 0; i < whole; i += W) {
            store_rows(grad, row + i, vexp(load_rows(logits, row + i, f32) - lse) - uniform, f32);
        }
        for (int64_t j = 0; j < rest; j++)
            store_value(grad, row + whole + j, expf(value_at(logits, row + whole + j, f32) - lse) - uniform, f32);
        float at_target = expf(value_at(logits, row + target, f32) - lse) - uniform - (1.0f - smoothing);
        store_value(grad, row + target, at_target, f32);
    }
    return 0;
}
