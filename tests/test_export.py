"""`nmt export --format ctranslate2`: CTranslate2 decodes the exported weights as nmt does."""

from __future__ import annotations

import subprocess
import sys

import pytest

from nmt.decoding.search import SearchOptions
from nmt.decoding.translate import Translator
from nmt.model.checkpoint import load_checkpoint
from tests.conftest import decoding

ctranslate2 = pytest.importorskip("ctranslate2")
LINES = ["A dog runs in the park.", "Two men are talking near a red car.", "A woman.", "Kids play football."]


def test_ctranslate2_greedy_equals_nmt_greedy_on_the_exported_model(tiny_checkpoint, tmp_path):
    out = tmp_path / "ct2"
    result = subprocess.run([sys.executable, "-m", "nmt_cli.main", "export", "--model", str(tiny_checkpoint),
                             "--out", str(out)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    import sentencepiece

    processor = sentencepiece.SentencePieceProcessor(model_file=str(out / "sentencepiece.model"))
    translator = ctranslate2.Translator(str(out), intra_threads=1)
    # a random model never stops by itself: the same cap for both (CTranslate2 does not count EOS)
    results = translator.translate_batch([processor.encode(line, out_type=str) for line in LINES], beam_size=1,
                                         max_decoding_length=12)
    theirs = [[processor.piece_to_id(piece) for piece in r.hypotheses[0]] for r in results]
    options = SearchOptions(beam_size=1, max_len_a=0, max_len_b=13, loop_guard=False)  # CTranslate2 has none
    checkpoint = load_checkpoint(tiny_checkpoint)
    sources = [checkpoint.tokenizer().encode(line) for line in LINES]
    found = Translator.from_checkpoint(checkpoint, decoding(checkpoint, options))._search_batch(sources)
    eos = checkpoint.config.eos_id
    assert theirs == [[t for t in hypotheses[0].tokens if t != eos] for hypotheses in found]  # the same tokens


def test_a_shortlist_is_exported_as_ctranslate2_s_vocabulary_map(tiny_checkpoint, tmp_path):
    import dataclasses

    import sentencepiece

    from nmt.apps.export import export_ctranslate2
    from nmt.data.corpus import load_embedded
    from nmt.model.shortlist import shortlist_from_text

    checkpoint = load_checkpoint(tiny_checkpoint)
    pairs = load_embedded("multi30k", "train")
    shortlist = shortlist_from_text(checkpoint.tokenizer(), pairs.source[:300], pairs.target[:300],
                                    checkpoint.config.vocab_size, per_token=3, frequent=20)
    out = export_ctranslate2(dataclasses.replace(checkpoint, shortlist=shortlist), tmp_path / "ct2")
    entries = [line.split("\t") for line in (out / "vmap.txt").read_text(encoding="utf-8").splitlines()]
    assert entries[0][0] == "" and len(entries[0][1].split()) == shortlist.shared_ids.numel()
    allowed = set(entries[0][1].split())
    processor = sentencepiece.SentencePieceProcessor(model_file=str(out / "sentencepiece.model"))
    source = processor.encode(LINES[0], out_type=str)
    listed = dict(entries[1:])
    for piece in source:
        assert piece in listed[piece].split()  # a source piece may be copied
        allowed |= set(listed[piece].split())
    translator = ctranslate2.Translator(str(out), intra_threads=1)
    result = translator.translate_batch([source], beam_size=1, max_decoding_length=12, use_vmap=True)[0]
    assert set(result.hypotheses[0]) <= allowed
