from __future__ import annotations

import pytest

from nmt.decoding.translate import Unit
from nmt.text.protect import protect
from nmt.text.typography import joined_elisions


@pytest.mark.parametrize("written, french", [
    ("l' Union européenne", "l'Union européenne"), ("L' euthanasie", "L'euthanasie"), ("qu' il", "qu'il"),
    ("jusqu' à présent", "jusqu'à présent"), ("aujourd' hui", "aujourd'hui"), ("C\u2019 est", "C\u2019est"),
    ("d'  une", "d'une"), ("l' Élysée", "l'Élysée"),
])
def test_the_space_after_an_elided_word_goes(written, french):
    assert joined_elisions(written) == french


@pytest.mark.parametrize("text", [
    "la lettre 'l' est muette", "l'Union", "il l' 1980", "l' « Union »", "Pull' n Bear", "le mot 'tel' et",
])
def test_other_apostrophes_keep_their_spaces(text):
    assert joined_elisions(text) == text


def test_a_translation_comes_back_without_the_space_and_its_entity_restored():
    protected = protect("The EU's site is www.europa.eu.")
    assert Unit([], protected, upper=False).restore("Le site de l' Union est ⦅1⦆.") == (
        "Le site de l'Union est www.europa.eu.")
    assert Unit([], None, upper=True).restore("l' Union") == "L'UNION"
