"""Cut a line into the pieces the model translates: sentences, then clauses of a sentence too long to take
whole, then (in the translator) word starts.

    split_sentences("Watch out! There's a hole.")          ->  ["Watch out!", "There's a hole."]
    split_clauses("First this, then that.", count, 3)      ->  ["First this,", "then that."]
    fit_piece("then that.", "Ensuite ça.")                 ->  "ensuite ça."

The models are trained on single sentences of a few dozen tokens: a line of several sentences is translated
a sentence at a time, and no piece is longer than `limit` tokens, which also bounds the time a hostile line
(thousands of words) takes, since each piece's target length is capped relative to its own length.
Sentence boundaries come from sentencex (Wikimedia's rule-based segmenter: abbreviations such as "Dr."
and "e.g.", quotes, ellipses), compiled and without model files to download.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from nmt.text.protect import verbatim_spans

# Cheap test before calling the segmenter: an end of sentence followed by more text somewhere in the line.
MAYBE_SEVERAL_SENTENCES = re.compile(r"[.!?\u2026\u3002\uff01\uff1f]\S*\s+\S")
STAND_IN = "\ue000{}\ue001"  # private-use characters around a number: what the segmenter sees of an entity
# Abbreviations the segmenter ends a sentence at though a number or name follows ("See Vol. 2 of it." ->
# "See Vol." and "2 of it.", "in Ft. Worth"): a sentence that ends with one goes on into the next.
BEFORE_NUMBER_OR_NAME = re.compile(r"(?<![\w.])(?:Vols?|Chs?|Chap|Eqs?|Figs?|Secs?|Paras?|Tab|Ex|Refs?|Ft|Pt)\.$")
# Where a long sentence can be cut: after a clause's punctuation and its spaces, the punctuation kept left.
CLAUSE_END = re.compile(r"(?<=[,;:\u2014\u2013)])\s+")


def split_sentences(text: str) -> list[str]:
    """The sentences of `text`, stripped, none empty; a single sentence comes back alone. A link, address,
    code or number is never cut ("example.com", "3.2.1"): the segmenter sees a stand-in without dots."""
    text = text.strip()
    if not MAYBE_SEVERAL_SENTENCES.search(text):
        return [text] if text else []
    from sentencex import segment

    originals = [text[start:end] for start, end in verbatim_spans(text)]
    for number, original in enumerate(originals):
        text = text.replace(original, STAND_IN.format(number), 1)
    sentences = []
    for sentence in segment("en", text):
        for number, original in enumerate(originals):
            sentence = sentence.replace(STAND_IN.format(number), original)
        if sentences and BEFORE_NUMBER_OR_NAME.search(sentences[-1]) and sentence.strip()[:1].isalnum():
            sentences[-1] += " " + sentence.strip()
        elif sentence.strip():
            sentences.append(sentence.strip())
    return sentences


def split_clauses(sentence: str, count_tokens: Callable[[str], int], limit: int) -> list[str]:
    """`sentence` cut after clause punctuation into pieces of at most `limit` tokens where it can be, each
    as long as the limit allows (a clause longer than the limit stays whole: the translator cuts it)."""
    pieces: list[str] = []
    for clause in CLAUSE_END.split(sentence):
        joined = f"{pieces[-1]} {clause}" if pieces else clause
        if pieces and count_tokens(joined) <= limit:
            pieces[-1] = joined
        else:
            pieces.append(clause)
    return pieces


CLAUSE_MARKS = ",;:\u2014\u2013"
SENTENCE_MARKS = ".!?\u2026"


def fit_piece(source: str, translation: str) -> str:
    """The translation of a piece of a line as a part of the line's translation: the model translates each
    piece as a sentence of its own, so a piece that starts in lower case (a clause, not a sentence) loses the
    capital the model gave its first word ("Bien que" -> "bien que"), and one that ends at a comma, semicolon
    or colon gets that mark back for the full stop the model put there."""
    text = translation
    first = next((char for char in source if char.isalpha()), "")
    if first.islower() and len(text) > 1 and text[0].isupper() and text[1].islower():
        text = text[0].lower() + text[1:]
    end = source.rstrip()[-1:]
    if end and end in CLAUSE_MARKS and text.endswith(".") and not text.endswith("..."):
        text = text[:-1] + end
    return text
