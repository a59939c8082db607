"""Shared fixtures and helpers: tiny models, attention written out as the formula, and a tiny checkpoint with a
real sentencepiece model."""

from __future__ import annotations

import dataclasses
import math
import os

import pytest
import torch

from nmt.data.corpus import load_embedded
from nmt.model.backend import Backend
from nmt.model.checkpoint import Checkpoint, model_weights, save_checkpoint
from nmt.model.config import ModelConfig
from nmt.model.transformer import Transformer
from nmt.text.tokenizer import train_tokenizer


def tiny_model(vocab_size: int = 60, seed: int = 0, **overrides) -> Transformer:
    torch.manual_seed(seed)
    config = ModelConfig.preset("tiny", vocab_size=vocab_size, dropout=0.0, **overrides)
    return Transformer(config).eval()


def decoding(checkpoint, options=None, **fields):
    """A DecodingConfig for Translator.from_checkpoint as a test wants it: fp32 on a CPU, one worker, `options`
    (SearchOptions) as the search where given, and `fields` over the rest (glossary, clause_split, ...)."""
    from nmt.decoding.configuration import DecodingConfig, DecodingFlags

    config = DecodingConfig.resolve(DecodingFlags(device="cpu", precision="fp32"), checkpoint, workers=1)
    return dataclasses.replace(config, **({"search": options} if options is not None else {}), **fields)


def cast(model: Transformer, precision: str, exact: bool = False, **chosen) -> tuple[Transformer, Backend]:
    """`model` cast for `precision` on its device, as a command would resolve it (exact: torch alone), and the
    backend; `chosen` overrides the backend's resolved fields (a product this machine would not pick, say)."""
    from nmt.decoding.inference import cast_for_inference

    backend = Backend.resolve(precision, next(model.parameters()).device, exact=exact)
    backend = dataclasses.replace(backend, **chosen)
    return cast_for_inference(model, backend), backend


def reference_attention(q, k, v, mask):
    """softmax(Q K^T / sqrt(d)) V with the weights returned."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    scores = scores.masked_fill(~mask, float("-inf"))
    weights = scores.softmax(dim=-1)
    return weights @ v, weights


@pytest.fixture(scope="session", autouse=True)
def prepared_corpora_in_a_temporary_folder(tmp_path_factory):
    """Corpora that `nmt train` prepares (nmt.data.prepare) go to this session's folder, not the user's cache;
    subprocesses inherit it."""
    os.environ["NMT_CACHE_DIR"] = str(tmp_path_factory.mktemp("nmt-cache"))


@pytest.fixture(scope="session")
def tokenizer():
    pairs = load_embedded("multi30k", "valid")
    return train_tokenizer(pairs.source + pairs.target, vocab_size=600)


@pytest.fixture(scope="session")
def tiny_checkpoint(tmp_path_factory, tokenizer):
    """A random tiny model (max 64 positions, so long lines get split) saved with a real tokenizer."""
    model = tiny_model(vocab_size=tokenizer.vocab_size, max_positions=64)
    path = tmp_path_factory.mktemp("ckpt") / "tiny.pt"
    save_checkpoint(path, Checkpoint(model.config, model_weights(model), tokenizer.model_bytes,
                                     decoding={"beam_size": 2, "max_len_a": 1.0, "max_len_b": 5}))
    return path


@pytest.fixture(scope="session")
def tagged_checkpoint(tmp_path_factory, tiny_checkpoint):
    """The tiny checkpoint as a model trained with register tags (`nmt train --register-tags`) says it is."""
    from nmt.model.checkpoint import load_checkpoint

    tagged = load_checkpoint(tiny_checkpoint)
    tagged.training = {"config": {"register_tags": True}}
    path = tmp_path_factory.mktemp("ckpt") / "tagged.pt"
    save_checkpoint(path, tagged)
    return path
