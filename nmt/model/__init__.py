"""The Transformer and everything that runs it: its configuration (`config`), the network (`transformer`),
attention kernels (`attention`, C kernels in `native`), decoder caches (`cache`), int8 weights (`quantize`),
CUDA graphs (`graphs`), the flat cached decoder step (`flat_decoder`), the lexical shortlist (`shortlist`),
the chunked training loss (`loss`) and checkpoint files (`checkpoint`). Imports `nmt.text`."""
