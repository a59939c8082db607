"""From a model to translations: the search (`search`: greedy, beam, sampling; `constraints`: glossary
terms), the decoders of each precision and device (`inference`), ensembles (`ensemble`), the decoding
configuration resolved once from flags and the model's defaults (`configuration`), `Translator`
(`translate`), word alignments (`alignment`) and forced scoring (`score`). Imports `nmt.text`, `nmt.data`
and `nmt.model`."""
