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

import array
import collections
import re
import unicodedata
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from rapidfuzz.distance import Levenshtein

from nmt.errors import FileRefused, UsageError

ACCELERATOR = re.compile(r"(?<![\w&_])[_&](?=\w)")
NGRAM = 3
CANDIDATES = 30  # entries sharing the most trigrams with a line whose ratio is computed
RAREST = 12  # a line's trigrams whose entries are counted: its rarest
COMMONEST = 50_000  # a trigram in more entries says too little to count them all: a line's cost is bounded
MAX_PAIRS = 1_000_000  # the pairs memories may hold: 0.7 KB each for sentences of 80 characters, read


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
    _trigrams: dict[str, array.array] | None = None  # trigram -> numbers of the entries holding it
    _longest: int = 0  # the longest normalized English

    def add(self, english: str, french: str, origin: str = "") -> None:
        if not english.strip() or not french.strip():
            return
        key = normalized(english)
        self._longest = max(self._longest, len(key))
        self._exact.setdefault(key, []).append(len(self.pairs))
        self._keys.append(key)
        self.pairs.append((english, french, origin))
        self._trigrams = None

    def __len__(self) -> int:
        return len(self.pairs)

    @classmethod
    def read(cls, paths: Sequence[str | Path], most: int = MAX_PAIRS) -> Memory:
        """The pairs of TMX, gettext (.po) and English TAB French (.tsv, .txt) files, in order; UsageError once
        they pass `most` pairs (what they hold in memory is bounded)."""
        memory = cls()
        for path in paths:
            for english, french in read_pairs(Path(path)):
                memory.add(english, french, Path(path).name)
                if len(memory) > most:
                    raise UsageError(f"the memories hold more than {most:,} pairs (at {path}): give the part of "
                                     "them your text is near")
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

    def index(self) -> dict[str, array.array]:
        """The trigram index fuzzy matches are found by, built on first use (a server builds it while it loads:
        480,000 entries took 15 s)."""
        if self._trigrams is None:
            self._trigrams = collections.defaultdict(lambda: array.array("I"))  # 4 bytes a posting, not 36
            for number, key in enumerate(self._keys):
                for gram in set(trigrams(key)):
                    self._trigrams[gram].append(number)
        return self._trigrams

    def fuzzy(self, text: str, threshold: float) -> Match | None:
        """The entry most similar to `text` at `threshold` or above, by the Levenshtein ratio, or None."""
        query = normalized(text)
        if not query or self._longest < threshold * len(query):  # no entry long enough to be that near
            return None
        shared = collections.Counter()
        grams = sorted((self.index().get(gram, ()) for gram in set(trigrams(query))), key=len)
        for postings in grams[:RAREST]:  # the rarest say the most, and cost the least
            if len(postings) <= COMMONEST:
                shared.update(postings)
        best: Match | None = None
        slack = (1 - threshold) * len(query) / threshold  # a longer or shorter entry cannot reach the threshold
        for number, _ in shared.most_common(CANDIDATES):
            key = self._keys[number]
            if abs(len(key) - len(query)) > slack + 1:
                continue
            english, french, origin = self.pairs[number]
            score = ratio(query, key, threshold)
            if score >= threshold and (best is None or score > best.score):
                best = Match("fuzzy", score, english, french, origin)
        return best


def trigrams(text: str) -> list[str]:
    padded = f" {text} "
    return [padded[i:i + NGRAM] for i in range(max(1, len(padded) - NGRAM + 1))]


def ratio(a: str, b: str, cutoff: float = 0.0) -> float:
    """1 - Levenshtein distance / the longer length (1.0 for equal strings; 0.0 below `cutoff`). RapidFuzz's,
    bit-parallel in C++: two lines of 1,000 characters in microseconds, where Python's two loops took 0.3 s
    (8 such lines held a server 64 s)."""
    return Levenshtein.normalized_similarity(a, b, score_cutoff=cutoff)


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


def read_pairs(path: Path) -> Iterator[tuple[str, str]]:
    """(English, French) pairs of a memory file, by its name: .tmx, .po, else English TAB French lines; read as
    a stream, a pair at a time (a memory of a gigabyte costs what its pairs cost, not a parse tree); one error
    line for a file that is not what its name says, where it goes wrong."""
    if not path.is_file():
        raise UsageError(f"cannot read the memory {path}: no such file")
    suffix = path.suffix.lower()
    if suffix == ".tmx":
        return _tmx_pairs(path)
    if suffix in (".po", ".pot"):
        return _po_pairs(path)
    return _tsv_pairs(path)


def _tsv_pairs(path: Path) -> Iterator[tuple[str, str]]:
    from nmt.data.corpus import stream_lines

    for number, line in enumerate(stream_lines(path), 1):
        if not line.strip() or line.startswith("#"):
            continue
        english, tab, french = line.partition("\t")
        if not tab:
            raise UsageError(f"{path}:{number}: a memory line is English TAB French")
        yield english.strip(), french.strip()


def _tmx_pairs(path: Path) -> Iterator[tuple[str, str]]:
    """The English and French segments of a TMX file's translation units (languages by xml:lang, en* and fr*),
    a unit at a time: each is dropped once read."""
    from lxml import etree

    with open(path, "rb") as head:
        if b"<!ENTITY" in head.read(65536):
            raise UsageError(f"cannot read the memory {path}: it declares XML entities (an entity bomb?)")
    lang = "{http://www.w3.org/XML/1998/namespace}lang"
    units = etree.iterparse(str(path), events=("end",), tag="tu", resolve_entities=False, no_network=True,
                            huge_tree=False)
    try:
        for _, unit in units:
            sides = {}
            for variant in unit.iter("tuv"):
                code = (variant.get(lang) or variant.get("lang") or "").lower()
                segment = variant.find("seg")
                if segment is not None:
                    sides.setdefault(code[:2], "".join(segment.itertext()))
            unit.clear()
            while unit.getprevious() is not None:  # the units read before it, which clear() leaves in the tree
                del unit.getparent()[0]
            if "en" in sides and "fr" in sides:
                yield sides["en"], sides["fr"]
    except etree.XMLSyntaxError as exc:
        raise UsageError(f"cannot read the memory {path}: {exc.msg} (line {exc.lineno})") from None
    except OSError as exc:
        raise UsageError(f"cannot read the memory {path}: {exc}") from None


def _po_pairs(path: Path) -> Iterator[tuple[str, str]]:
    """The msgid and msgstr of a gettext catalog's translated entries (not fuzzy, obsolete or plural), an entry
    at a time (nmt.data.po)."""
    from nmt.data.corpus import stream_lines
    from nmt.data.po import po_entries

    try:
        for entry in po_entries(stream_lines(path)):
            if entry.translated and "msgid_plural" not in entry.fields:
                yield entry.fields["msgid"], entry.fields["msgstr"]
    except FileRefused as exc:
        raise UsageError(f"cannot read the memory {path}: {exc}") from None


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
