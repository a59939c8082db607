"""A translation memory: what people translated already, put before the model as CAT tools (OmegaT, Weblate,
Poedit) put theirs before machine translation.

    memory = Memory.read(["project.tmx", "old.po", "glossary.tsv"])
    memory.exact("Sign Out")            ->  [Match("exact", 1.0, "Sign Out", "Se déconnecter")]   used as it is
    memory.fuzzy("Sign out now", 0.85)  ->  Match("fuzzy", 0.87, "Sign out", "Se déconnecter")     offered only

An exact match is one after normalising case, whitespace and accelerators (_File, &File; its translation comes
without one: a catalog's own goes back on, nmt.apps.catalogs); where its translations disagree, the most frequent
wins (case aside), and a tie is broken by the model (nmt.decoding.translate: the one nearest its own
translation). A fuzzy match is the entry most similar to the line (the Levenshtein ratio of the normalised
strings: 1 - distance / longer length) at `threshold` or above: found through an index of character trigrams
(the entries sharing the most of the line's rarest trigrams, then their ratio), not a scan, and offered beside
the model's translation (jsonl's "memory", the server's alternatives); it does not steer the model, whose own
translation of a near string is often better than the memory's of another.

The shipped interface memory (`shipped_memory`, data/memory/interface.tsv.gz) is the three interface corpora
(software_ui, software_ui_extra: strings of 86 free desktop applications; web_apps: of 40-odd web applications,
shops, accounts, e-mail; each string under its application's licence) less every pair whose English is in one of
their dev splits, so that the figures on those stay honest.
"""

from __future__ import annotations

import collections
import re
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from nmt.errors import UsageError

ACCELERATOR = re.compile(r"(?<![\w&_])[_&](?=\w)")
NGRAM = 3
CANDIDATES = 30  # entries sharing the most trigrams with a line whose ratio is computed
RAREST = 12  # a line's trigrams whose entries are counted: its rarest


def normalized(text: str) -> str:
    """`text` as memories compare it: NFC, accelerators out, whitespace collapsed, case folded."""
    text = ACCELERATOR.sub("", unicodedata.normalize("NFC", text))
    return " ".join(text.split()).casefold()


@dataclass(frozen=True)
class Match:
    kind: str  # exact or fuzzy
    score: float  # 1.0 for an exact match
    source: str  # the memory's English
    translation: str  # its French
    origin: str = ""  # the memory it came from

    def to_dict(self) -> dict:
        return {"match": self.kind, "score": round(self.score, 4), "source": self.source,
                "translation": self.translation, "origin": self.origin}


@dataclass
class Memory:
    """English and French pairs, with an exact index and, built on first use, a trigram index."""

    pairs: list[tuple[str, str, str]] = field(default_factory=list)  # English, French, origin
    _keys: list[str] = field(default_factory=list)  # each pair's normalized English
    _exact: dict[str, list[int]] = field(default_factory=dict)
    _trigrams: dict[str, list[int]] | None = None

    def add(self, english: str, french: str, origin: str = "") -> None:
        if not english.strip() or not french.strip():
            return
        key = normalized(english)
        self._exact.setdefault(key, []).append(len(self.pairs))
        self._keys.append(key)
        self.pairs.append((english, french, origin))
        self._trigrams = None

    def __len__(self) -> int:
        return len(self.pairs)

    @classmethod
    def read(cls, paths: Sequence[str | Path]) -> Memory:
        """The pairs of TMX, gettext (.po) and English TAB French (.tsv, .txt) files, in order."""
        memory = cls()
        for path in paths:
            for english, french in read_pairs(Path(path)):
                memory.add(english, french, Path(path).name)
        return memory

    def exact(self, text: str) -> list[Match]:
        """The translations of an exact match of `text`, the most frequent first (case aside), those as frequent
        as it beside it; [] for none. Each is written with `text`'s capital or capitals."""
        found = self._exact.get(normalized(text))
        if not found:
            return []
        counts = collections.Counter(unicodedata.normalize("NFC", self.pairs[i][1]).casefold() for i in found)
        best = max(counts.values())
        chosen, seen = [], set()
        # of the entries whose French differs in case alone, the one whose English is cased as `text` speaks for
        # them ("Sold out" is "Épuisé", which the entry "SOLD OUT" / "ÉPUISÉ" before it would write in capitals)
        for i in sorted(found, key=lambda i: (self.pairs[i][0] != text, capitals(self.pairs[i][0]) != capitals(text))):
            english, french, origin = self.pairs[i]
            key = unicodedata.normalize("NFC", french).casefold()
            if counts[key] == best and key not in seen:
                seen.add(key)
                chosen.append(Match("exact", 1.0, english, cased_as(text, ACCELERATOR.sub("", french)), origin))
        return chosen

    def fuzzy(self, text: str, threshold: float) -> Match | None:
        """The entry most similar to `text` at `threshold` or above, by the Levenshtein ratio, or None."""
        query = normalized(text)
        if not query:
            return None
        if self._trigrams is None:
            self._trigrams = collections.defaultdict(list)
            for number, key in enumerate(self._keys):
                for gram in set(trigrams(key)):
                    self._trigrams[gram].append(number)
        shared = collections.Counter()
        grams = sorted((self._trigrams.get(gram, ()) for gram in set(trigrams(query))), key=len)
        for postings in grams[:RAREST]:  # the rarest say the most, and cost the least
            shared.update(postings)
        best: Match | None = None
        slack = (1 - threshold) * len(query) / threshold  # a longer or shorter entry cannot reach the threshold
        for number, _ in shared.most_common(CANDIDATES):
            key = self._keys[number]
            if abs(len(key) - len(query)) > slack + 1:
                continue
            english, french, origin = self.pairs[number]
            score = ratio(query, key)
            if score >= threshold and (best is None or score > best.score):
                best = Match("fuzzy", score, english, french, origin)
        return best


def trigrams(text: str) -> list[str]:
    padded = f" {text} "
    return [padded[i:i + NGRAM] for i in range(max(1, len(padded) - NGRAM + 1))]


def ratio(a: str, b: str) -> float:
    """1 - Levenshtein distance / the longer length (1.0 for equal strings)."""
    if a == b:
        return 1.0
    if not a or not b:
        return 0.0
    previous = list(range(len(b) + 1))
    for i, char in enumerate(a, 1):
        current = [i]
        for j, other in enumerate(b, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (char != other)))
        previous = current
    return 1.0 - previous[-1] / max(len(a), len(b))


def capitals(text: str) -> bool:
    """Whether `text` is written in capitals (two letters or more, all upper case)."""
    letters = [char for char in text if char.isalpha()]
    return len(letters) > 1 and all(char.isupper() for char in letters)


def cased_as(text: str, french: str) -> str:
    """`french` in capitals where `text` is, else with `text`'s first letter's case."""
    if capitals(text):
        return french.upper()
    first = next((char for char in text if char.isalpha()), "")
    index = next((i for i, char in enumerate(french) if char.isalpha()), None)
    if not first or index is None:
        return french
    letter = french[index].upper() if first.isupper() else french[index].lower()
    return french[:index] + letter + french[index + 1:]


def read_pairs(path: Path) -> Iterable[tuple[str, str]]:
    """(English, French) pairs of a memory file, by its name: .tmx, .po, else English TAB French lines."""
    if not path.is_file():
        raise UsageError(f"cannot read the memory {path}: no such file")
    suffix = path.suffix.lower()
    if suffix == ".tmx":
        return _tmx_pairs(path)
    if suffix in (".po", ".pot"):
        import polib

        try:
            catalog = polib.pofile(str(path))
        except (OSError, ValueError, UnicodeError) as exc:
            raise UsageError(f"cannot read the memory {path}: {exc}") from None
        return [(entry.msgid, entry.msgstr) for entry in catalog.translated_entries() if not entry.msgid_plural]
    from nmt.data.corpus import read_lines

    pairs = []
    for number, line in enumerate(read_lines(path), 1):
        if not line.strip() or line.startswith("#"):
            continue
        english, tab, french = line.partition("\t")
        if not tab:
            raise UsageError(f"{path}:{number}: a memory line is English TAB French")
        pairs.append((english.strip(), french.strip()))
    return pairs


def _tmx_pairs(path: Path) -> list[tuple[str, str]]:
    """The English and French segments of a TMX file's translation units (languages by xml:lang, en* and fr*)."""
    from lxml import etree

    data = path.read_bytes()
    if b"<!ENTITY" in data[:65536]:
        raise UsageError(f"cannot read the memory {path}: it declares XML entities (an entity bomb?)")
    try:
        root = etree.fromstring(data, etree.XMLParser(resolve_entities=False, no_network=True, huge_tree=False))
    except etree.XMLSyntaxError as exc:
        raise UsageError(f"cannot read the memory {path}: {exc}") from None
    lang = "{http://www.w3.org/XML/1998/namespace}lang"
    pairs = []
    for unit in root.iter("tu"):
        sides = {}
        for variant in unit.iter("tuv"):
            code = (variant.get(lang) or variant.get("lang") or "").lower()
            segment = variant.find("seg")
            if segment is not None:
                sides.setdefault(code[:2], "".join(segment.itertext()))
        if "en" in sides and "fr" in sides:
            pairs.append((sides["en"], sides["fr"]))
    return pairs


INTERFACE_MEMORY = "memory/interface.tsv.gz"  # under nmt.data.corpus.data_dir(); written by interface_pairs
INTERFACE_CORPORA = ("software-ui", "software-ui-extra", "web-apps")  # the shipped memory's, in this order
SHIPPED_MEMORY_WORDS = 6  # the longest line the shipped memory serves: labels, buttons, menu items


def interface_pairs() -> list[tuple[str, str]]:
    """The interface corpora's training pairs, less every pair whose English is one of their dev splits' (the
    shipped memory's content: `make memory` writes it to INTERFACE_MEMORY)."""
    from nmt.data.corpus import load_embedded

    held_out = {normalized(line) for name in INTERFACE_CORPORA for line in load_embedded(name, "dev").source}
    pairs = []
    for name in INTERFACE_CORPORA:
        train = load_embedded(name, "train")
        pairs += [(english, french) for english, french in zip(train.source, train.target, strict=True)
                  if normalized(english) not in held_out and "\t" not in english + french]
    return pairs


class Deferred:
    """A memory read the first time it is asked for a match (the shipped one takes about a second to read: a
    run that never translates a short line never pays it)."""

    def __init__(self, read):
        self._read, self._memory = read, None

    def __getattr__(self, name: str):
        if self._memory is None:
            self._memory = self._read()
        return getattr(self._memory, name)


@cache
def shipped_memory() -> Memory:
    """The interface memory shipped in data/ (interface_pairs), read once."""
    from nmt.data.corpus import data_dir

    memory = Memory()
    for english, french in read_pairs(data_dir() / INTERFACE_MEMORY):
        memory.add(english, french, "interface")
    return memory
