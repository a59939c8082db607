"""nmt: English-to-French neural machine translation with the Transformer of "Attention Is All You Need".

The pipeline, one module per stage: `corpus` (embedded and local corpora) -> `tokenizer` (sentencepiece)
-> `batching` -> `model` (the Transformer, with `cache.DecoderState` for incremental decoding) ->
`search` (greedy and beam) -> `translate` / `evaluate`; `train` beside it, `checkpoint` for files.
"""

__version__ = "0.1.0"
