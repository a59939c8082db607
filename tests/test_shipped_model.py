"""The shipped model (data/models/en-fr.pt): it loads, translates, scores, and exports faithfully."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from nmt.data.corpus import data_dir, load_embedded
from nmt.decoding.configuration import MAX_PIECE_TOKENS
from nmt.decoding.search import SearchOptions
from nmt.decoding.translate import Translator
from nmt.model.checkpoint import load_checkpoint

SHIPPED = data_dir() / "models" / "en-fr.pt"
NMT = [sys.executable, "-m", "nmt_cli.main"]


def test_the_shipped_model_is_small_and_carries_its_decoding_defaults():
    assert SHIPPED.stat().st_size < 30 * 2**20
    checkpoint = load_checkpoint(SHIPPED)
    assert checkpoint.decoding["beam_size"] > 1 and "lenpen" in checkpoint.decoding
    assert checkpoint.train_state is None


def test_translates_the_readme_examples_without_a_model_flag():
    examples = (data_dir() / "examples.en").read_text()
    result = subprocess.run(NMT + ["translate", "-q"], input=examples, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.split("\n")[:-1]
    assert len(lines) == 4 and all(lines)
    # content words a working model cannot miss
    assert "chien" in lines[0].lower() and "parc" in lines[0].lower()
    assert "enfants" in lines[1].lower() and "plage" in lines[1].lower()
    assert "café" in lines[2].lower()
    assert "gare" in lines[3].lower()


def test_scores_above_a_floor_on_test_2016():
    result = subprocess.run(NMT + ["eval", "--test", "multi30k:test_2016_flickr", "--limit", "50", "--json"],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["bleu"] > 35.0  # a broken or untrained model scores below 5


def test_ctranslate2_greedy_matches_nmt_greedy_on_the_embedded_test_sets(tmp_path):
    ctranslate2 = pytest.importorskip("ctranslate2")
    import sentencepiece

    from nmt.apps.export import export_ctranslate2

    checkpoint = load_checkpoint(SHIPPED)
    out = export_ctranslate2(checkpoint, tmp_path / "ct2")
    sources = [line for split in ("test_2016_flickr", "test_2017_flickr")
               for line in load_embedded("multi30k", split).source[:200]]
    # whole sentences with names as text, as CTranslate2 translates them (the shipped model cuts long ones into
    # clauses and puts names behind placeholders)
    whole = Translator.from_checkpoint(checkpoint, SearchOptions(beam_size=1), max_piece_tokens=MAX_PIECE_TOKENS,
                                       protect_names=False)
    ours = [t.text for t in whole.translate(sources)]
    processor = sentencepiece.SentencePieceProcessor(model_file=str(out / "sentencepiece.model"))
    translator = ctranslate2.Translator(str(out), intra_threads=2)
    results = translator.translate_batch([processor.encode(s, out_type=str) for s in sources], beam_size=1,
                                         max_batch_size=64)
    theirs = [processor.decode(r.hypotheses[0]) for r in results]
    same = sum(a == b for a, b in zip(ours, theirs, strict=True))
    assert same >= 0.99 * len(sources), f"{same} of {len(sources)} identical"
