"""`nmt train` (`train`: the loop, distributed or not, resumable), the allocator setting it runs with
(`allocator`), decoding defaults tuned on a validation set (`tune`) and training curves (`plot`). Imports
every layer below `nmt.apps`."""
