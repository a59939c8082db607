"""Glossaries: the terms matched, and constrained beam search on a scripted model and a tiny one."""

from __future__ import annotations

import pytest
import torch

from nmt.decoding.constraints import Glossary, constrained_search
from nmt.decoding.search import SearchOptions, search
from nmt.errors import UsageError
from tests.conftest import decoding, tiny_model
from tests.test_search import SRC, A, B, ScriptedModel, logp


def test_glossary_terms_match_whole_words_case_insensitively(tmp_path):
    path = tmp_path / "terms.tsv"
    path.write_text("cat\tchat\nred car\tvoiture rouge\n\nDog\tchien\n")
    glossary = Glossary.read(path)
    assert glossary.matches("The Cat saw a RED CAR and a dogs.") == ["chat", "voiture rouge"]
    path.write_text("cat chat\n")
    with pytest.raises(UsageError, match="line 1"):
        Glossary.read(path)


@pytest.mark.parametrize("beam", [1, 2, 3])
def test_every_hypothesis_holds_the_constraints_and_the_best_is_the_most_probable_that_does(beam):
    options = SearchOptions(beam_size=beam, nbest=beam, lenpen=0.0, max_len_a=0.0, max_len_b=4)
    unconstrained = search(ScriptedModel(), SRC, options)[0][0]
    assert unconstrained.tokens == ([A, B] if beam == 1 else [B])  # a beam finds B then EOS: 0.4 x 0.9
    found = constrained_search(ScriptedModel(), SRC, options, [[[A]]])[0]
    assert all(A in h.tokens for h in found)
    assert found[0].tokens == [A, B] and found[0].score == pytest.approx(logp(0.6, 0.5, 0.9), abs=1e-5)
    two = constrained_search(ScriptedModel(), SRC, options, [[[A, A]]])[0][0]
    assert two.tokens == [A, A] and two.score == pytest.approx(logp(0.6, 0.1, 0.9), abs=1e-5)
    assert constrained_search(ScriptedModel(), SRC, options, [[]])[0][0].tokens == unconstrained.tokens


def test_constraints_hold_in_batches_of_a_real_model():
    model = tiny_model(vocab_size=60)
    src = torch.tensor([[5, 6, 7, 8, 3], [9, 10, 3, 0, 0], [11, 12, 13, 3, 0]])
    constraints = [[[20, 21]], [], [[30], [40, 41, 42]]]
    options = SearchOptions(beam_size=3, nbest=2, max_len_a=1.0, max_len_b=4)
    found = constrained_search(model, src, options, constraints)
    for own, hypotheses in zip(constraints, found, strict=True):
        assert hypotheses
        for hypothesis in hypotheses:
            for constraint in own:
                assert any(hypothesis.tokens[i : i + len(constraint)] == constraint
                           for i in range(len(hypothesis.tokens))), (constraint, hypothesis.tokens)
    alone = search(model, src[1:2], options)[0]  # no constraint: as beam search
    assert [h.tokens for h in found[1]] == [h.tokens for h in alone]
    assert [h.score for h in found[1]] == pytest.approx([h.score for h in alone], abs=1e-4)


@pytest.mark.parametrize("lenpen", [0.0, 1.0])
def test_a_sentence_without_terms_takes_the_beam_search_s_steps_and_stops_by_its_rule(lenpen):
    """The glossary search shares the beam search's step and stopping rule (nmt.decoding.search): with no
    terms it decodes as many steps and finds the same hypotheses, with and without a length penalty (where
    the rule differs)."""

    class Counting:
        def __init__(self, model):
            self.model, self.config, self.fixed_rows, self.steps = model, model.config, False, 0

        def init_state(self, *args, **kwargs):
            return self.model.init_state(*args, **kwargs)

        def decode_step(self, tokens, state):
            self.steps += 1
            return self.model.decode_step(tokens, state)

    options = SearchOptions(beam_size=3, nbest=1, lenpen=lenpen, max_len_a=0.0, max_len_b=4)
    beam, glossary = Counting(ScriptedModel()), Counting(ScriptedModel())
    expected, found = search(beam, SRC, options), constrained_search(glossary, SRC, options, [[]])
    assert [[h.tokens for h in each] for each in found] == [[h.tokens for h in each] for each in expected]
    assert glossary.steps == beam.steps


def test_translations_hold_the_glossary_s_terms_and_lines_without_terms_are_unchanged(tiny_checkpoint, tmp_path):
    import subprocess
    import sys

    from nmt.decoding.translate import Translator
    from nmt.model.checkpoint import load_checkpoint

    checkpoint = load_checkpoint(tiny_checkpoint)
    options = SearchOptions(beam_size=3, max_len_a=1.0, max_len_b=5)
    path = tmp_path / "terms.tsv"
    path.write_text("dog\tchien\npark\tparc\n")
    lines = ["A dog runs in the park.", "Two men are talking.", "THE DOG SLEEPS."]
    plain = Translator.from_checkpoint(checkpoint, decoding(checkpoint, options)).translate(lines)
    held = Translator.from_checkpoint(checkpoint, decoding(checkpoint, options, glossary=path)).translate(lines)
    assert "chien" in held[0].text and "parc" in held[0].text and "CHIEN" in held[2].text
    assert held[1].text == plain[1].text
    result = subprocess.run([sys.executable, "-m", "nmt_cli.main", "translate", "--model", str(tiny_checkpoint),
                             "--beam", "3", "--max-len-a", "1", "--max-len-b", "5", "--glossary", str(path)],
                            input="\n".join(lines) + "\n", capture_output=True, text=True)
    assert result.stdout.splitlines() == [t.text for t in held]
    path.write_text("dog\n")
    bad = subprocess.run([sys.executable, "-m", "nmt_cli.main", "translate", "--model", str(tiny_checkpoint),
                          "--glossary", str(path)], input="A dog.\n", capture_output=True, text=True)
    assert bad.returncode == 2 and bad.stderr.startswith("error: ")
