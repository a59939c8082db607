"""The flags a translation gets for a user to check it (nmt.text.flags, nmt.decoding.translate)."""

from __future__ import annotations

from nmt.text.flags import (
    FRENCH_WORDS,
    kind_of,
    load_english_words,
    lost_numbers,
    low_confidence,
    unknown_words,
    untranslated_words,
)
from nmt.text.names import missing_names


def test_english_words_are_those_only_english_writes():
    english = load_english_words()
    assert {"the", "with", "please", "run"} <= english
    assert not {"message", "options", "important", "service", "table"} & english  # French words too


def test_english_words_kept_from_the_source_are_untranslated_but_not_names_or_french_words():
    assert untranslated_words("Run the tests now.", "Run les tests maintenant.") == ["Run"]
    assert untranslated_words("Sign out of the account", "Sign out du compte") == ["Sign", "out"]
    assert untranslated_words("The options are important.", "Les options sont importantes.") == []
    assert untranslated_words("Bob will fix it.", "Bob le réparera.") == []
    assert untranslated_words("The cat sleeps.", "Le chat dort with.") == []  # not the source's word


def test_english_kept_inside_a_hyphenated_word_is_untranslated():
    assert untranslated_words("List-based preferences", "Préférences List-based") == ["List", "based"]
    assert untranslated_words("A well-known issue", "Un problème bien connu") == []


def test_words_no_french_corpus_writes_are_named_but_not_the_source_s_or_real_inflections():
    french = load_english_words(FRENCH_WORDS)
    assert {"personnaliser", "réponses", "sous-projet", "regardes"} <= french
    assert unknown_words("Personalize", "Personaliser") == ["Personaliser"]
    assert unknown_words("Subproject", "Sous-projecte") == ["Sous-projecte"]  # by its parts
    assert unknown_words("Replies", "Répondres") == ["Répondres"]
    assert unknown_words("Open Zorblax now", "Ouvrez Zorblax maintenant") == []  # the source's word, kept
    assert unknown_words("He was bored", "Il s'ennuyait") == [] and unknown_words("Subproject", "Sous-projet") == []
    assert unknown_words("Physicists", "Les physiciens") == []


def test_numbers_lost_are_named_as_the_source_writes_them_and_a_french_form_keeps_them():
    assert lost_numbers("It costs $1,299 for 3 people.", "Il coûte cher pour 3 personnes.") == ["1299"]
    assert lost_numbers("It costs $1,299.", "Il coûte 1\u202f299\u00a0$.") == []
    assert lost_numbers("At 2 p.m. on March 3, 2025.", "À 14 h le 3 mars 2025.") == []


def test_names_lost_are_those_the_translation_does_not_hold_as_words():
    assert missing_names(["Smith", "Marie"], "Le docteur Smith a vu Mariette.") == ["Marie"]


def test_a_low_confidence_is_by_kind_of_line():
    floors = {"short": -1.5, "sentence": -1.0}
    assert kind_of("Sign Out") == "short" and kind_of("The cat sleeps on the mat.") == "sentence"
    assert low_confidence("Sign Out", floors) == -1.5
    assert low_confidence("The cat sleeps on the mat.", floors) == -1.0
