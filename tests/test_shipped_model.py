"""Every shipped model (data/models/models.json): it loads, translates, scores above its domain's floor, and
exports faithfully; the default one translates the README's examples."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from nmt.apps.shipped import default_model_name, shipped_models
from nmt.data.corpus import data_dir, load_embedded
from nmt.decoding.configuration import MAX_PIECE_TOKENS
from nmt.decoding.search import SearchOptions
from nmt.decoding.translate import Translator
from nmt.model.checkpoint import load_checkpoint
from nmt.text.conventions import NO_TYPOGRAPHY
from nmt.text.tokenizer import REGISTER_MARKS
from tests.conftest import decoding

NMT = [sys.executable, "-m", "nmt_cli.main"]
MODELS = sorted(shipped_models())
# the slow checks (a test set translated, an export compared) run on the default model in `make test`, on the
# others in `make test-all`, so that shipping one more model does not lengthen the quick suite
CHECKED = [pytest.param(name, marks=() if name == default_model_name() else pytest.mark.slow) for name in MODELS]

# Each model's own domain, the first lines of a test set there, and a floor a broken or untrained model
# cannot reach (those score below 5) but the model clears by a margin
FLOORS = {"captions": ("multi30k:test_2016_flickr", 50, 35.0),
          "general": ("news-commentary:dev_newsdiscuss", 50, 12.9)}


def test_every_shipped_model_has_a_floor():
    assert set(MODELS) <= set(FLOORS)


@pytest.mark.parametrize("name", MODELS)
def test_a_shipped_model_is_small_and_carries_its_decoding_defaults(name):
    path = shipped_models()[name]["path"]
    assert path.stat().st_size <= 30e6
    checkpoint = load_checkpoint(path)
    assert checkpoint.decoding["beam_size"] > 1 and "lenpen" in checkpoint.decoding
    assert checkpoint.train_state is None and checkpoint.shortlist is not None


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


@pytest.mark.parametrize("name", CHECKED)
def test_a_shipped_model_scores_above_its_floor_in_its_domain(name):
    test_set, lines, floor = FLOORS[name]
    result = subprocess.run(NMT + ["eval", "--model", name, "--test", test_set, "--limit", str(lines), "--format",
                                   "jsonl"], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["bleu"] > floor


@pytest.mark.parametrize("name", CHECKED)
def test_ctranslate2_greedy_matches_nmt_greedy_on_the_embedded_test_sets(name, tmp_path):
    ctranslate2 = pytest.importorskip("ctranslate2")
    import sentencepiece

    from nmt.apps.export import export_ctranslate2

    checkpoint = load_checkpoint(shipped_models()[name]["path"])
    out = export_ctranslate2(checkpoint, tmp_path / "ct2")
    sources = [line for split in ("test_2016_flickr", "test_2017_flickr")
               for line in load_embedded("multi30k", split).source[:200]]
    # whole sentences with names as text, as CTranslate2 translates them (a shipped model cuts long ones into
    # clauses and puts names behind placeholders), the model's text as it wrote it
    whole = Translator.from_checkpoint(checkpoint, decoding(checkpoint, SearchOptions(beam_size=1),
                                                           clause_split=MAX_PIECE_TOKENS, protect_names=False,
                                                           typography=NO_TYPOGRAPHY))
    ours = [t.text for t in whole.translate(sources)]
    processor = sentencepiece.SentencePieceProcessor(model_file=str(out / "sentencepiece.model"))
    # a model with register tags opens every source with the one asked for (formal by default): CTranslate2 is
    # given the same piece first
    tag = [] if whole.formality == "auto" else \
        [processor.id_to_piece(whole.tokenizer.register_id(REGISTER_MARKS[whole.formality]))]
    translator = ctranslate2.Translator(str(out), intra_threads=2)
    results = translator.translate_batch([tag + processor.encode(s, out_type=str) for s in sources], beam_size=1,
                                         max_batch_size=64)
    theirs = [processor.decode(r.hypotheses[0]) for r in results]
    same = sum(a == b for a, b in zip(ours, theirs, strict=True))
    assert same >= 0.99 * len(sources), f"{same} of {len(sources)} identical"


def test_a_first_word_the_model_copies_is_given_to_it_again_in_lower_case(monkeypatch):
    """The shipped model copies some English words that open a sentence, capital and all ("Kill process" ->
    "Le processus de Kill", "(Contributed by" -> "(Contributed de"): such a line is translated again with the
    word in lower case, the capital put back on the French."""
    import nmt.decoding.translate

    checkpoint = load_checkpoint(shipped_models()[default_model_name()]["path"])
    translator = Translator.from_checkpoint(checkpoint, decoding(checkpoint))
    lines = ["Kill process", "(Contributed by Victor Stinner in 18395.)", "Sales rose 12% in the third quarter.",
             "Iris Meder was disappointed.", "Magenta Channel"]
    openings = ["Kill", "Contributed", "Sales"]
    units = translator._units("Kill process", lowered=True)
    assert units[0].lowered and translator.tokenizer.decode(units[0].pieces[0]).endswith("kill process")
    assert units[0].restore("tuer le processus") == "Tuer le processus"
    french = [t.text for t in translator.translate(lines)]
    for opening, text in zip(openings, french, strict=False):
        assert opening not in text and text.lstrip("(")[:1].isupper(), text
    assert "Iris" in french[3]  # a name: not lowered
    monkeypatch.setattr(nmt.decoding.translate, "copies_opening", lambda units, text: False)
    without = [t.text for t in translator.translate(lines)]
    assert all(opening in text for opening, text in zip(openings, without, strict=False))  # what it mends
    assert without[3:] == french[3:]  # the lines it leaves alone translate as without it


def test_the_readme_s_scores_are_the_shipped_model_s_and_it_stays_short():
    """The README's table of the default model's BLEU is models.json's, which `nmt models` prints: one source."""
    root = Path(__file__).resolve().parent.parent
    readme = (root / "README.md").read_text(encoding="utf-8")
    shipped = json.loads((root / "data" / "models" / "models.json").read_text(encoding="utf-8"))
    scores = shipped["models"][shipped["default"]]["bleu"]
    table = dict(re.findall(r"^\| ([\w:-]+) \| ([\d.]+) \|$", readme, re.M))
    assert table == {name: f"{bleu:.2f}" for name, bleu in scores.items()}
    assert len(readme) <= 10_000, f"the README is {len(readme)} characters"
