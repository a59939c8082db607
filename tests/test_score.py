"""`nmt score`: the model's log-probability of given translations, equal to the search's own scores."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from nmt.data.corpus import data_dir, load_embedded
from nmt.decoding.configuration import DecodingConfig
from nmt.decoding.score import Scorer
from nmt.decoding.search import SearchOptions
from nmt.decoding.translate import Translator
from nmt.model.checkpoint import load_checkpoint

NMT = [sys.executable, "-m", "nmt_cli.main"]


@pytest.mark.parametrize("lenpen", [0.0, 0.6, 1.0])
def test_the_score_of_each_beam_hypothesis_is_the_score_the_search_gave_it(tiny_checkpoint, lenpen):
    checkpoint = load_checkpoint(tiny_checkpoint)
    model, tokenizer = checkpoint.build_model("cpu"), checkpoint.tokenizer()
    translator = Translator(model, tokenizer, DecodingConfig.plain(SearchOptions(beam_size=3, nbest=3, lenpen=lenpen,
                                                                                 max_len_a=1.0, max_len_b=5)))
    sources = [tokenizer.encode(text) for text in load_embedded("multi30k", "valid").source[:8]]
    scorer = Scorer(model, tokenizer, lenpen=lenpen)
    for source, hypotheses in zip(sources, translator._search_batch(sources), strict=True):
        scored = scorer._score_batch([source] * len(hypotheses), [h.tokens for h in hypotheses])
        for hypothesis, pair in zip(hypotheses, scored, strict=True):
            assert pair.log_prob == pytest.approx(hypothesis.log_prob, abs=1e-4)
            assert pair.score == pytest.approx(hypothesis.score, abs=1e-4)
            assert len(pair.tokens) == len(hypothesis.tokens) + 1


def test_pairs_are_scored_in_order_whatever_the_batches(tiny_checkpoint):
    checkpoint = load_checkpoint(tiny_checkpoint)
    pairs = load_embedded("multi30k", "valid")
    sources, targets = pairs.source[:20] + [""], pairs.target[:20] + ["Rien."]
    scorer = Scorer(checkpoint.build_model("cpu"), checkpoint.tokenizer())
    alone = [scorer.score([s], [t])[0] for s, t in zip(sources, targets, strict=True)]
    batched = Scorer(scorer.model, scorer.tokenizer, max_tokens=200).score(sources, targets)
    assert [p.log_prob for p in batched[:-1]] == pytest.approx([p.log_prob for p in alone[:-1]], abs=1e-4)
    assert batched[-1].log_prob is None and batched[-1].to_text(per_token=True) == ""  # no source: not scored


def test_cli_scores_translate_s_own_jsonl_and_refuses_bad_input(tmp_path):
    shipped = data_dir() / "models" / "en-fr.pt"
    sources = load_embedded("multi30k", "test_2016_flickr").source[:12]
    # --exact: scoring runs in fp32, and the fast default's int8 weights move scores by more than 1e-4;
    # --clause-split 128: whole sentences, each with its n-best list, as nmt score sees them; --lenpen 0: a
    # score is the sum of its tokens' log-probabilities, so score / confidence counts the best one's tokens
    translated = subprocess.run(NMT + ["translate", "--model", str(shipped), "--format", "jsonl", "--nbest", "2",
                                       "--no-protect", "--exact", "--clause-split", "128", "--lenpen", "0", "-q"],
                                input="\n".join(sources) + "\n", capture_output=True, text=True)
    assert translated.returncode == 0, translated.stderr
    lines = [json.loads(line) for line in translated.stdout.splitlines()]
    candidates = [(r["source"], best["translation"], best["score"]) for r in lines for best in r["nbest"]]
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text("".join(json.dumps({"source": s, "translation": t}) + "\n" for s, t, _ in candidates))
    scored = subprocess.run(NMT + ["score", "--model", str(shipped), "--format", "jsonl", "--lenpen", "0",
                                   "--input", str(pairs)], capture_output=True, text=True)
    assert scored.returncode == 0, scored.stderr
    records = [json.loads(line) for line in scored.stdout.splitlines()]
    assert len(records) == len(candidates) == 24
    written = tmp_path / "scores.jsonl"  # -o as translate and eval take it: the same lines, in a file
    into_file = subprocess.run(NMT + ["score", "--model", str(shipped), "--format", "jsonl", "--lenpen", "0",
                                      "--input", str(pairs), "-o", str(written)], capture_output=True, text=True)
    assert into_file.returncode == 0 and into_file.stdout == "" and written.read_text() == scored.stdout
    # nmt score reads a text in the pieces it encodes to; a hypothesis can spell the same text in other pieces
    # (the second best often is the best's words in other pieces). Compare each best hypothesis spelt in its
    # text's own pieces (its token count, EOS included, is the encoding's), and the second bests whose text no
    # better hypothesis has
    tokenizer = load_checkpoint(shipped).tokenizer()
    own_pieces = {(r["source"], r["translation"]) for r in lines if r["confidence"]
                  and round(r["score"] / r["confidence"]) == len(tokenizer.encode(r["translation"])) + 1}
    seen, compared = set(), 0
    for index, ((source, translation, expected), record) in enumerate(zip(candidates, records, strict=True)):
        best = index % 2 == 0
        if (best and (source, translation) in own_pieces) or (not best and (source, translation) not in seen):
            compared += 1
            assert record["score"] == pytest.approx(expected, abs=1e-4), translation
        seen.add((source, translation))
    assert compared >= 20
    src, tgt = tmp_path / "a.en", tmp_path / "a.fr"
    src.write_text("A dog.\nA cat.\n")
    tgt.write_text("Un chien.\n")
    mismatch = subprocess.run(NMT + ["score", "--model", str(shipped), "--src", str(src), "--tgt", str(tgt)],
                              capture_output=True, text=True)
    assert mismatch.returncode == 2 and mismatch.stderr.strip().endswith("has 1") and not mismatch.stdout
    bad = subprocess.run(NMT + ["score", "--model", str(shipped), "--format", "jsonl"], input='{"source": 1}\n',
                         capture_output=True, text=True)
    assert bad.returncode == 2 and bad.stderr.startswith("error: line 1:")
