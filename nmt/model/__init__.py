"""The Transformer and everything that runs it: its configuration (`config`), the network (`transformer`),
attention kernels (`attention`, C kernels in `native`), decoder caches (`cache`), int8 weights (`quantize`),
CUDA graphs (`graphs`), the flat cached decoder step (`flat_decoder`), the lexical shortlist (`shortlist`),
the chunked training loss (`loss`) and checkpoint files (`checkpoint`). Imports `nmt.text`."""

# --precision's values, here where importing them imports no torch (the command line builds its options first)
PRECISIONS = ("auto", "fp32", "bf16", "fp16", "int8", "int8_bf16", "int8_fp32")
