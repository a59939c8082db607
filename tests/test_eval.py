"""`nmt eval`: the same numbers as sacrebleu itself, with signatures, and clear errors."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import sacrebleu

from nmt.text.metrics import moses_lc_tok, score

NMT = [sys.executable, "-m", "nmt_cli.main", "eval"]
HYPOTHESES = ["Un chien court dans l'herbe.", "Deux hommes parlent devant un magasin.", "Une femme lit."]
REFERENCES = ["Un chien court dans l'herbe verte.", "Deux hommes discutent devant un magasin.", "Une femme lit."]


@pytest.fixture
def files(tmp_path):
    hyp, ref = tmp_path / "hyp.fr", tmp_path / "ref.fr"
    hyp.write_text("\n".join(HYPOTHESES) + "\n")
    ref.write_text("\n".join(REFERENCES) + "\n")
    return hyp, ref


def test_scores_equal_sacrebleu_and_carry_signatures(files):
    hyp, ref = files
    result = subprocess.run(NMT + ["--hyp", str(hyp), "--ref", str(ref), "--json"], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    record = json.loads(result.stdout)
    assert record["bleu"] == round(sacrebleu.corpus_bleu(HYPOTHESES, [REFERENCES]).score, 2)
    assert record["chrf"] == round(sacrebleu.corpus_chrf(HYPOTHESES, [REFERENCES]).score, 2)
    assert record["lines"] == 3
    assert record["signatures"]["bleu"].startswith("nrefs:1|case:mixed|eff:no|tok:13a")
    text = subprocess.run(NMT + ["--hyp", str(hyp), "--ref", str(ref)], capture_output=True, text=True).stdout
    assert "BLEU" in text and "nrefs:1" in text and "chrF" in text


def test_lowercased_moses_tokenized_bleu_is_named_and_differs_from_cased():
    pytest.importorskip("sacremoses")  # an optional extra (in dev, so CI runs this test)
    hypotheses, references = ["L'Homme Mange."], ["l'homme mange ."]
    scores = score(hypotheses, references, lc_tok=True)
    assert moses_lc_tok(["L'herbe, verte."]) == ["l&apos; herbe , verte ."]
    assert scores.bleu_lc_tok == pytest.approx(100.0)
    assert scores.bleu < 100.0
    assert scores.signatures["bleu_lc_tok"].startswith("moses-lc-tok(fr)")


def test_line_count_mismatch_and_unreadable_file_are_exit_2(files, tmp_path):
    hyp, ref = files
    short = tmp_path / "short.fr"
    short.write_text("Une ligne.\n")
    for args in (["--hyp", str(short), "--ref", str(ref)], ["--hyp", str(tmp_path / "none"), "--ref", str(ref)],
                 ["--test", "multi30k"], ["--ref", str(ref)]):
        result = subprocess.run(NMT + args, capture_output=True, text=True)
        assert result.returncode == 2, args
        assert result.stderr.startswith("error: ") and "Traceback" not in result.stderr


def test_translates_an_embedded_test_set_with_a_model(tiny_checkpoint):
    result = subprocess.run(NMT + ["--test", "multi30k:test_2016_flickr", "--limit", "5", "--model",
                                   str(tiny_checkpoint), "--beam", "1", "--json"], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    record = json.loads(result.stdout)
    assert record["lines"] == 5 and record["test"] == "multi30k:test_2016_flickr"


def test_eval_decodes_with_the_options_of_translate(tiny_checkpoint, tmp_path):
    from nmt.data.corpus import load_embedded

    pairs = load_embedded("multi30k", "valid")
    src, ref = tmp_path / "src.en", tmp_path / "ref.fr"
    src.write_text("\n".join(pairs.source[:6]) + "\n")
    ref.write_text("\n".join(pairs.target[:6]) + "\n")
    options = ["--model", str(tiny_checkpoint), "--beam", "2", "--precision", "int8_fp32", "--threads", "1",
               "--workers", "2", "--batch-size", "2"]
    translated = subprocess.run([sys.executable, "-m", "nmt_cli.main", "translate", *options, "--input", str(src)],
                                capture_output=True, text=True)
    assert translated.returncode == 0, translated.stderr
    hyp = tmp_path / "hyp.fr"
    hyp.write_text(translated.stdout)
    scored = [json.loads(subprocess.run(NMT + args + ["--ref", str(ref), "--json"], capture_output=True,
                                        text=True).stdout)
              for args in (["--src", str(src), *options], ["--hyp", str(hyp)])]
    assert scored[0]["bleu"] == scored[1]["bleu"] and scored[0]["chrf"] == scored[1]["chrf"]


def test_tune_stores_the_best_decoding_defaults_and_half_precision_weights(tiny_checkpoint, tmp_path):
    import torch

    from nmt.model.checkpoint import load_checkpoint

    out = tmp_path / "tuned.pt"
    result = subprocess.run([sys.executable, "-m", "nmt_cli.main", "tune", "--model", str(tiny_checkpoint),
                             "--valid", "multi30k:valid", "--limit", "12", "--beams", "1,2", "--lenpens", "0.5,1.5",
                             "--half", "--no-repeat-ngram", "4", "--output", str(out)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    table = [line.split() for line in result.stdout.splitlines() if line.startswith("beam ")]
    assert len(table) == 3  # greedy once, beam 2 with both penalties
    best = max(table, key=lambda row: float(row[5]))
    tuned = load_checkpoint(out)
    assert tuned.decoding["beam_size"] == int(best[1]) and tuned.decoding["lenpen"] == float(best[3].rstrip(":"))
    assert tuned.decoding["no_repeat_ngram"] == 4
    assert tuned.weights["embed.weight"].dtype == torch.float16
    assert "fp16 weights change BLEU" in result.stdout


def test_tune_scores_each_setting_as_eval_decodes_it():
    """References written by the default decoding (nmt eval's: this machine's precision, the model's shortlist where
    beam search pays with it) score 100 in tune's table: a tune decoding in fp32 over the whole vocabulary scored
    this random model's references 0 on a bf16 CPU, where the default decodes over the shortlist."""
    from dataclasses import replace

    from nmt.apps.shipped import model_path
    from nmt.data.corpus import ParallelText
    from nmt.decoding.configuration import DecodingConfig, DecodingFlags
    from nmt.decoding.translate import Translator
    from nmt.model.checkpoint import Checkpoint, load_checkpoint, model_weights
    from nmt.training.tune import tune_decoding
    from tests.conftest import tiny_model

    general = load_checkpoint(model_path("general"))  # its vocabulary writes words, a small one letters
    model = tiny_model(vocab_size=16000, max_positions=64)
    checkpoint = Checkpoint(model.config, model_weights(model), general.spm_model, decoding={"max_len_b": 5},
                            shortlist=general.shortlist)
    source = ["A man in a blue shirt is riding a bicycle down the street.", "Two dogs are playing in the snow.",
              "The children laugh while their parents watch from the bench.", "She reads a book in the garden."]
    flags = DecodingFlags(min_len=16)  # long enough for BLEU to tell
    as_eval = Translator.from_checkpoint(checkpoint, DecodingConfig.resolve(replace(flags, beam=2, lenpen=1.4),
                                                                            checkpoint))
    references = [translation.text for translation in as_eval.translate(source)]
    assert score(references, references).bleu == pytest.approx(100.0)
    _, table = tune_decoding(checkpoint, ParallelText(source, references), beams=[2], lenpens=[1.4], flags=flags)
    assert table == [(2, 1.4, pytest.approx(100.0))]


def test_empty_files_are_one_error_line_not_a_score(tmp_path):
    empty = tmp_path / "empty.fr"
    empty.write_text("")
    for args in (["--hyp", str(empty), "--ref", str(empty)], ["--src", str(empty), "--ref", str(empty)]):
        result = subprocess.run(NMT + args, capture_output=True, text=True)
        assert result.returncode == 2 and result.stderr == "error: nothing to score: the files have no lines\n"


@pytest.mark.slow
def test_tune_takes_several_validation_sets_each_cut_to_the_limit(tiny_checkpoint, tmp_path):
    def bleu_table(valid: str) -> list[str]:
        result = subprocess.run([sys.executable, "-m", "nmt_cli.main", "tune", "--model", str(tiny_checkpoint),
                                 "--valid", valid, "--limit", "8", "--beams", "1", "--lenpens", "1.0", "-o",
                                 str(tmp_path / "tuned.pt")], capture_output=True, text=True)
        assert result.returncode == 0, result.stderr
        return [line.split(": ", 1)[1] for line in result.stdout.splitlines() if line.startswith("beam")]

    once = bleu_table("multi30k:valid")
    assert once[0].endswith("on multi30k:valid (8 pairs)")
    twice = bleu_table("multi30k:valid, multi30k:valid")
    assert twice[0].endswith("(16 pairs)")  # each set cut to the limit, then joined
    other = bleu_table("multi30k:valid,tatoeba:dev")
    assert other[0].endswith("(16 pairs)") and other[0].split(" on ")[0] != once[0].split(" on ")[0]
