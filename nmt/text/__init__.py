"""Text in and out of the model, without torch: sentencepiece tokenization (`tokenizer`), entities put
behind placeholders and casing (`protect`), sentences and clauses (`segment`), sacreBLEU scores
(`metrics`). Imports nothing of nmt but `nmt.errors`."""
