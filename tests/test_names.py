"""Companies, brands and products a translation keeps (nmt.text.names.brand_spans): the names counted in the
training corpora (nmt.data.name_counts), told from the same words as words by the sentence around them."""

from __future__ import annotations

from nmt.data.name_counts import inside_words, kept_names
from nmt.text.names import brand_spans
from nmt.text.names import kept_names as shipped_names


def spans_of(sentence: str) -> list[str]:
    return [sentence[start:end] for start, end in brand_spans(sentence)]


def test_a_name_that_is_also_a_word_is_a_name_inside_a_sentence_or_as_a_verb_s_subject():
    names = shipped_names()
    assert names["Shell"] < 1 < names["Microsoft"]  # "shell" is mostly a word; "Microsoft" always a name
    assert spans_of("Shell reported record profits.") == ["Shell"]
    assert spans_of("Shell's profits rose.") == ["Shell"]
    assert spans_of("Prices at Shell stations rose.") == ["Shell"]  # capitalized inside a sentence
    assert spans_of("Shell shapes vary.") == []  # a word opening a sentence, no verb after it
    assert spans_of("The shell of an egg is thin.") == []
    assert spans_of("Total cut its dividend.") == ["Total"] and spans_of("Total cost: 12 euros.") == []


def test_a_name_takes_the_capitalized_words_after_it_and_a_heading_only_sure_names():
    assert spans_of("Microsoft Teams is down this morning.") == ["Microsoft Teams"]
    assert spans_of("I use Google Maps on Monday.") == ["Google Maps"]  # not the day after it
    assert spans_of("Open Shell Settings Now") == []  # a heading capitalizes every word
    assert spans_of("Install Firefox On Linux") == ["Firefox", "Linux"]  # mostly names, even there


def test_names_are_counted_where_the_french_keeps_the_english_word_inside_a_sentence():
    assert inside_words("Prices at Shell and at Total rose. Orange fell.") == ["Shell", "Total"]  # not a first word
    assert inside_words("Open The Shell Settings") == []  # Title Case: a heading
    pairs = [("We met at Acme yesterday.", "Nous nous sommes vus chez Acme hier.")] * 10
    pairs += [("The report of the Parliament is ready.", "Le rapport du Parlement est prêt.")] * 10
    pairs += [("They flew to Europe today.", "Ils sont partis en Europe aujourd'hui."),
              ("The future of Europe is bright.", "L'avenir de l'Europe est radieux.")] * 5
    from collections import Counter

    inside, kept, lower = Counter(), Counter(), Counter()
    for english, french in pairs:  # count() over corpora, here over these pairs
        from nmt.data.name_counts import FRENCH_WORD, WORD

        french_words = set(WORD.findall(french)) | set(FRENCH_WORD.findall(french))
        for word in inside_words(english):
            inside[word] += 1
            kept[word] += word in french_words
    assert [name for name, _, _ in kept_names(inside, kept, lower)] == ["Acme", "Europe"]  # l'Europe holds it
