"""nmt: English-to-French neural machine translation with the Transformer of "Attention Is All You Need".

Layers, each a subpackage that imports only the layers above it in this list (and `nmt.errors`, which every
layer may import); docs/ARCHITECTURE.md draws them:

- `text`: sentencepiece tokens, placeholders for entities, sentence and clause splitting, BLEU and chrF.
- `data`: corpora (embedded, local files, hub datasets), augmentation, token batches, the prepared cache.
- `model`: the Transformer, its attention kernels, caches, quantization, CUDA graphs, the flat decoder
  step, the lexical shortlist, the training loss, and checkpoint files.
- `decoding`: search (greedy, beam, sampling, constrained), the resolved decoding configuration, ensembles,
  and `Translator`, which turns lines of text into translations.
- `training`: `nmt train`, checkpoint averaging, tuning decoding defaults, training curves.
- `apps`: what users run beside translation: the HTTP server, the robustness report, CTranslate2 export,
  the shipped models.
"""

__version__ = "0.1.0"
