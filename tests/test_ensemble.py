"""Ensembles: the models' mean log-probabilities at each step, through the search's own interface."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from nmt.data.corpus import load_embedded
from nmt.decoding.ensemble import Ensemble
from nmt.decoding.search import SearchOptions
from nmt.decoding.translate import Translator
from nmt.errors import UsageError
from nmt.model.backend import Backend
from nmt.model.checkpoint import Checkpoint, load_checkpoint, model_weights, save_checkpoint
from nmt.model.flat_decoder import FlatDecoder
from tests.conftest import decoding, tiny_model


def test_each_step_is_the_mean_of_the_models_log_probabilities():
    first, second = tiny_model(seed=1), tiny_model(seed=2)
    fp32 = Backend.resolve("fp32", torch.device("cpu"))
    ensemble = Ensemble([FlatDecoder(first, fp32), FlatDecoder(second, fp32)])
    src = torch.tensor([[5, 6, 7, 3], [8, 9, 3, 0]])
    state = ensemble.init_state(src, beam_size=1)
    states = [first.init_state(src), second.init_state(src)]
    tokens = torch.full((2,), first.config.bos_id)
    for token in (10, 11, 12):
        mean, state = ensemble.decode_step(tokens, state)
        alone = []
        for index, model in enumerate((first, second)):
            log_probs, states[index] = model.decode_step(tokens, states[index])
            alone.append(log_probs)
        torch.testing.assert_close(mean, (alone[0] + alone[1]) / 2, atol=1e-5, rtol=0)
        tokens = torch.full((2,), token)


def test_a_model_with_itself_translates_as_it_does_alone_and_vocabularies_must_match(tiny_checkpoint, tmp_path):
    checkpoint = load_checkpoint(tiny_checkpoint)
    options = SearchOptions(beam_size=3, max_len_a=1.0, max_len_b=5)
    lines = load_embedded("multi30k", "valid").source[:10]
    alone = Translator.from_checkpoint(checkpoint, decoding(checkpoint, options)).translate(lines)
    twice = Translator.from_checkpoint(checkpoint, decoding(checkpoint, options), others=(checkpoint,)).translate(lines)
    assert [t.text for t in twice] == [t.text for t in alone]
    assert [t.score for t in twice] == pytest.approx([t.score for t in alone], abs=1e-4)
    foreign = Checkpoint(checkpoint.config, checkpoint.weights, checkpoint.spm_model[:-1] + b"x")
    with pytest.raises(UsageError, match="one sentencepiece model"):
        Translator.from_checkpoint(checkpoint, decoding(checkpoint, options), others=(foreign,))
    other = tmp_path / "other.pt"
    model = tiny_model(vocab_size=checkpoint.config.vocab_size, seed=5, max_positions=64)
    save_checkpoint(other, Checkpoint(model.config, model_weights(model), checkpoint.spm_model))
    result = subprocess.run([sys.executable, "-m", "nmt_cli.main", "translate", "-m", str(tiny_checkpoint), "-m",
                             str(other), "--beam", "2"], input="A dog runs.\nTwo men.\n", capture_output=True,
                            text=True)
    assert result.returncode == 0 and len(result.stdout.splitlines()) == 2, result.stderr
