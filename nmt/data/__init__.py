"""Training and test data: the embedded corpora and test sets, local files (`corpus`); the training pairs
of a DataSpec as a stream (`sources`), with `augment`'s variants; token batches and padding (`batching`);
the tokenized, memory-mapped cache that `nmt prepare` makes (`prepare`). Imports `nmt.text`."""
