"""Lines cut into sentences and clauses before translation (nmt.text.segment)."""

from __future__ import annotations

from nmt.text.segment import fit_piece, split_clauses, split_sentences


def test_sentences_are_split_at_their_ends_but_not_after_abbreviations():
    text = 'Dr. Okonkwo met Mr. Smith, e.g. at 3.30 p.m. He said "Hello!" and left.  Really?'
    assert split_sentences(text) == ['Dr. Okonkwo met Mr. Smith, e.g. at 3.30 p.m.', 'He said "Hello!" and left.',
                                     "Really?"]


def test_one_sentence_comes_back_alone_and_blank_text_gives_none():
    assert split_sentences("  A dog runs in the park.  ") == ["A dog runs in the park."]
    assert split_sentences("version 3.2.1 of www.example.com") == ["version 3.2.1 of www.example.com"]
    assert split_sentences("") == [] and split_sentences(" \t ") == []


def words(text: str) -> int:
    return len(text.split())


def test_clauses_fill_pieces_up_to_the_limit_and_keep_every_word():
    sentence = "When it rains, the dog sleeps; the cat, however, goes out: it likes the rain, they say."
    pieces = split_clauses(sentence, words, limit=6)
    assert pieces == ["When it rains, the dog sleeps;", "the cat, however, goes out:", "it likes the rain, they say."]
    assert all(words(piece) <= 6 for piece in pieces)
    assert " ".join(pieces) == sentence
    assert split_clauses(sentence, words, limit=100) == [sentence]


def test_a_clause_longer_than_the_limit_stays_whole():
    assert split_clauses("a b c d e f g, h", words, limit=3) == ["a b c d e f g,", "h"]


def test_links_addresses_codes_and_numbers_are_never_cut():
    line = "Visit www.example.com. Version 3.2.1 costs $1,249.99. Mail a.b@c.fr or SEE HTTPS://X.COM/FAQ NOW."
    assert split_sentences(line) == ["Visit www.example.com.", "Version 3.2.1 costs $1,249.99.",
                                     "Mail a.b@c.fr or SEE HTTPS://X.COM/FAQ NOW."]


def test_a_clause_s_translation_fits_the_middle_of_a_sentence():
    assert fit_piece("although several members worried.", "Bien que plusieurs membres s'inquiètent.") == \
        "bien que plusieurs membres s'inquiètent."
    assert fit_piece("near the river,", "Près de la rivière.") == "près de la rivière,"
    assert fit_piece("and then;", "Et puis...") == "et puis..."  # an ellipsis is the model's own
    assert fit_piece("Paris is far,", "Paris est loin,") == "Paris est loin,"  # a capital in the source stays
    assert fit_piece("the USA won.", "USA a gagné.") == "USA a gagné."  # an acronym keeps its capitals
    assert fit_piece("", "") == ""


def test_an_abbreviation_before_a_number_or_a_name_does_not_end_the_sentence():
    # the segmenter cut "See Fig. 3 and Vol. 2 of the report." after "Vol." and "in Ft. Worth" after "Ft."
    for line in ("See Fig. 3 and Vol. 2 of the report.", "See Sec. 4 and Ch. 3 now.",
                 "Open Eq. 7 now.", "He met Gov. Brown in Ft. Worth."):
        assert split_sentences(line) == [line]
    assert split_sentences("Buy Vol. 2. Then read it.") == ["Buy Vol. 2.", "Then read it."]
