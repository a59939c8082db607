"""Embedded corpora and the shipped model, installed as the `nmt_data` package (see README.md)."""
