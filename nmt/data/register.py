"""Training pairs in the French of a reader: elisions joined, and (with --register-tags) the English side tagged with
the register of the French, so that a model learns to write the one it is asked for (`nmt translate --formality`).

    source = registered(training_source(spec), RegisterTags())   # the same pairs, cleaned and tagged

A tag is a mark before the English side (nmt.text.tokenizer.REGISTER_MARKS) that the tokenizer turns into one
id no text ever gives. As Sennrich et al. did for German (Controlling Politeness in NMT via Side Constraints,
2016), a pair whose French says vous is tagged formal and one that says tu informal (nmt.text.register), most of
the time (`tagged`), the rest left untagged, so that `--formality auto` (no tag) keeps the model's own choice.
A pair whose French addresses no one gets a tag drawn at random (`neutral`): decoding always sends one (formal
by default), and the tag must not push a "vous" into a sentence that has none. One exception: an English
imperative whose French is neither an infinitive ("Open File" / "Ouvrir le fichier") nor in -ez is left
untagged, since its French is most likely the informal imperative that nmt.text.register cannot see ("Look!" /
"Regarde !"). A pair whose French mixes both registers is left untagged.
"""

from __future__ import annotations

import random
import re
import zlib
from collections.abc import Iterator
from dataclasses import dataclass

from nmt.data.corpus import PairSource, ParallelText
from nmt.text.register import FORMAL, INFORMAL, MIXED, register_of
from nmt.text.tokenizer import REGISTER_MARKS
from nmt.text.typography import joined_elisions

REGISTER_VERSION = 1  # part of the prepared corpus's identity: change it when the tagging or cleaning changes

# English verbs that open an imperative ("Look!", "Sit down."), the commonest of Tatoeba's, and the words that
# open a request ("Please", "Don't")
IMPERATIVE_OPENERS = frozenset("""
please don't do never be come get let give stop take keep look go try stay just turn have put bring leave excuse
quit read wait show hurry call help hold ask close sit write fill make stand open tell shut grab watch answer cut
wake speak follow forget add remember hang move step check buy pass use hand choose see sign trust drink eat guess
listen find talk draw lock sing think correct drop taste lie start pick send pull throw explain light search lay
drive calm forgive say break cover stir allow contact fight pour push meet pardon consider pay feel run join face
ignore clean cook count walk feed act prepare relax expect fasten concentrate cross behave carry click pray remove
clear rest beware press shake rinse smile avoid change sleep dance play learn teach love enjoy imagine believe
relax cheer shoot kill hit catch jump climb swim fly sell save fix hide""".split())
FIRST_WORD = re.compile(r"[^\W\d_][\w'’]*")


@dataclass(frozen=True)
class RegisterTags:
    tagged: float = 0.9  # the share of pairs with a register that get its tag
    neutral: float = 0.9  # the share of pairs without one that get a tag drawn at random
    seed: int = 1

    def identity(self) -> str:
        return f"register v{REGISTER_VERSION} {self}"


def cleaned(source: PairSource) -> PairSource:
    """`source` with the French elisions joined ("l' Union" -> "l'Union": about one in thirteen in Europarl)."""

    def read(size: int) -> Iterator[ParallelText]:
        for chunk in source.chunks(size):
            yield ParallelText(chunk.source, [joined_elisions(target) for target in chunk.target])

    return PairSource(f"{source.identity} + elisions joined v{REGISTER_VERSION}", read, source.valid)


def registered(source: PairSource, options: RegisterTags) -> PairSource:
    """`source` cleaned, its English sides tagged with the register of their French (see the module docstring)."""
    clean = cleaned(source)

    def read(size: int) -> Iterator[ParallelText]:
        for number, chunk in enumerate(clean.chunks(size)):
            rng = random.Random(f"{options.seed}:{number}:{zlib.crc32(b'register')}")
            yield ParallelText([tag(s, t, options, rng) for s, t in zip(chunk.source, chunk.target, strict=True)],
                               chunk.target)

    return PairSource(f"{clean.identity} + {options.identity()}", read, clean.valid)


def tag(english: str, french: str, options: RegisterTags, rng: random.Random) -> str:
    """The English side with its register mark before it, or as it was."""
    register = register_of(french)
    draw = rng.random()
    if register == MIXED:
        return english
    if register is None:
        if draw >= options.neutral or looks_informal_imperative(english, french):
            return english
        register = FORMAL if rng.random() < 0.5 else INFORMAL
    elif draw >= options.tagged:
        return english
    return REGISTER_MARKS[register] + english


def looks_informal_imperative(english: str, french: str) -> bool:
    """Whether an English imperative may have an informal French imperative that shows no pronoun: the English
    opens with a verb of IMPERATIVE_OPENERS and the French with a word that is no infinitive."""
    english_word, french_word = FIRST_WORD.search(english), FIRST_WORD.search(french)
    if not english_word or english_word.group().lower().replace("’", "'") not in IMPERATIVE_OPENERS:
        return False
    return not french_word or not french_word.group().lower().endswith(INFINITIVE_ENDINGS)


# The endings of French infinitives that no informal imperative has ("Ouvre", "Montre" end in -re too)
INFINITIVE_ENDINGS = ("er", "ir", "dre", "ire", "ttre", "ivre", "être", "aître", "oître")
