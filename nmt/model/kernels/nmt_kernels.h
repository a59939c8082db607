/* nmt's C kernels for CPU decoding: the one public header of the library nmt.model.native compiles from this
   folder and binds with ctypes (tests/test_native.py compares these prototypes with the bindings and with
   the library's exported symbols). Sizes are int64_t, flags int32_t, tensors contiguous CPU memory; bf16
   values are uint16_t. Each function's contract is written above its definition:

     attention.c   decode_self_attention, decode_cross_attention: a cached step's attention over bf16 caches
     scores.c      decode_log_softmax, decode_log_softmax_rest, decode_beam_top_k, decode_best
     shortlist.c   decode_sentence_logits, decode_sentence_logits_int7: each sentence's own target tokens
     int8.c        the int8 product of int8_fp32: rows quantized on their own scales, exact int32 sums
     layers.c      decode_layer_norm, decode_layers, encode_layers: a whole layer stack in one call
     train.c       train_dropout, train_cross_entropy: a training step's dropout and loss in one pass each

   Functions that return int32_t return 0 on success; what other values mean is written at each. */

#ifndef NMT_KERNELS_H
#define NMT_KERNELS_H

#include <stdint.h>

#define NMT_API __attribute__((visibility("default")))

/* The weights of one layer, in the order of nmt.model.transformer's DECODER_LAYER and ENCODER_LAYER (a test
   compares them): three pointers each, a linear layer's packed int8 weights, output scales and bias (or
   NULL), a layer norm's weight, bias and NULL. */
enum nmt_decoder_weight {
    SELF_Q, SELF_KV, SELF_OUT, SELF_NORM, CROSS_Q, CROSS_OUT, CROSS_NORM, FFN_UP, FFN_DOWN, FFN_NORM, DECODER_WEIGHTS
};
enum nmt_encoder_weight {
    ENCODER_Q, ENCODER_KV, ENCODER_OUT, ENCODER_ATTENTION_NORM, ENCODER_FFN_UP, ENCODER_FFN_DOWN, ENCODER_FFN_NORM,
    ENCODER_WEIGHTS
};
#define POINTERS_PER_WEIGHT 3

/* attention.c */
NMT_API int32_t decode_self_attention(const void *q, const uint16_t *keys, const uint16_t *values, void *out,
                                      int64_t T, int64_t n, int64_t D, float scale, int32_t f32);
NMT_API int32_t decode_cross_attention(const void *q, const uint16_t *keys, const uint16_t *values,
                                       const int64_t *lengths, void *out, int64_t N, int64_t K, int64_t H, int64_t S,
                                       int64_t D, float scale, int32_t f32);

/* scores.c */
NMT_API void decode_log_softmax(const void *logits, float *out, int64_t rows, int64_t width, int32_t f32);
NMT_API int32_t decode_log_softmax_rest(const float *logits, const float *sample, int64_t stride,
                                        const float *rest_bias, const int64_t *owners, int64_t N, float *out,
                                        int64_t R, int64_t width, int64_t K);
NMT_API int32_t decode_beam_top_k(const float *log_probs, const float *scores, float *values, int64_t *indices,
                                  int64_t N, int64_t width, int64_t V, int64_t k);
NMT_API void decode_best(const float *x, float *values, int64_t *indices, int64_t R, int64_t V);

/* shortlist.c */
NMT_API int32_t decode_sentence_logits(const void *q, const void *shared, const uint16_t *weights, const int64_t *ids,
                                       int64_t pieces, const float *bias, const int64_t *starts, const int64_t *counts,
                                       int64_t batch, const int64_t *sentences, float *out, int64_t N, int64_t K,
                                       int64_t D, int64_t F, int64_t width, int32_t f32);
NMT_API int32_t decode_sentence_logits_int7(const float *q, const float *shared, const uint8_t *weights,
                                            const float *scales, const int64_t *ids, int64_t pieces, const float *bias,
                                            const int64_t *starts, const int64_t *counts, int64_t batch,
                                            const int64_t *sentences, float *out, int64_t N, int64_t K, int64_t D,
                                            int64_t F, int64_t width);

/* int8.c */
NMT_API int32_t int8_linear(const float *x, const uint8_t *packed, const float *column_scales, const float *bias,
                            float *out, int64_t R, int64_t N, int64_t K, int32_t relu, int32_t bits);
NMT_API int32_t int8_rows_products(const int8_t *rows, const uint8_t *packed, int32_t *out, int64_t R, int64_t N,
                                   int64_t K);
NMT_API int32_t int7_rows_products(const int8_t *rows, const uint8_t *packed, int32_t *out, int64_t R, int64_t N,
                                   int64_t K);

/* layers.c */
NMT_API void decode_layer_norm(const float *x, const float *weight, const float *bias, float *out, int64_t R,
                               int64_t D, float eps);
NMT_API int32_t decode_layers(float *x, const void *const *weights, int64_t L, uint16_t *const *self_cache,
                              int64_t step, const uint16_t *const *cross_cache, const int64_t *lengths, int64_t N,
                              int64_t K, int64_t H, int64_t Dh, int64_t F, int64_t S, float scale, float eps,
                              int32_t pre_norm, int32_t bits);
NMT_API int32_t encode_layers(float *x, const void *const *weights, int64_t L, int64_t N, int64_t S, int64_t H,
                              int64_t Dh, int64_t F, float scale, float eps, int32_t pre_norm, int32_t bits);

/* train.c */
NMT_API void train_dropout(const void *x, void *out, int64_t n, int64_t first, const int64_t *seed_at,
                           int32_t dropped, float scale, int32_t f32);
NMT_API int32_t train_cross_entropy(const void *logits, const int64_t *targets, float *losses, void *grad,
                                   int64_t rows, int64_t width, int64_t pad, float smoothing, int32_t f32);

#endif
