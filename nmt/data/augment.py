"""Training pairs that teach a model ordinary input: entities to copy, capitals, long sentences.

    source = augmented(training_source(spec), Augment())    # the same pairs, each chunk followed by variants

Captions and everyday sentences hold almost no numbers, links, codes or capitals, so a model trained on them
garbles all of these. As the Firefox translations pipeline does with OpusTrainer's modifiers, the corpus
gets extra pairs, made from its own with these probabilities per pair (the originals stay):
- upper: both sides in capitals;
- title: the English side in Title Case, the French as it was;
- heading (of the short pairs, HEADING_WORDS English words at most): a heading or label, its final period gone from
  both sides and the English in Title Case ("Delivery Options" / "Options de livraison");
- swap (of the pairs whose sides share a name or a number, such as Tatoeba's "Tom" or a year): that word
  replaced on both sides by a random entity of a kind people paste (a URL, an e-mail address, a code, a
  phone number, a price, a time, a number written the English way in English and, half the time, the French
  way in French, a name, an emoji) or, a third of the time, by a placeholder ⦅n⦆ (nmt.text.protect), which
  decoding puts in place of such entities;
- emoji: an emoji after both sides;
- join: the pair joined with one or two others of its chunk into one long pair (several sentences).
Variants are drawn from a generator seeded by the chunk's number: the same corpus gives the same pairs.
"""

from __future__ import annotations

import random
import re
import string
from collections.abc import Iterator
from dataclasses import dataclass

from nmt.data.corpus import PairSource, ParallelText
from nmt.text.casing import SMALL_WORDS
from nmt.text.protect import PLACEHOLDER

AUGMENT_VERSION = 3  # part of the prepared corpus's identity: change it when the variants change

# Names are drawn as a first name and (mostly) a surname from these lists, from many languages. None of
# their words is in the robustness sets (tests/test_augment.py checks), so what those sets measure of names
# is copying, not memory.
FIRST_NAMES = ("Amina", "Bogdan", "Camille", "Dario", "Esperanza", "Farid", "Greta", "Hamza", "Imani", "Jarosław",
               "Kaito", "Leilani", "Malik", "Noor", "Orla", "Pavel", "Rania", "Soren", "Tatiana", "Umar", "Valentina",
               "Wanjiru", "Yaw", "Zofia", "Alejandro", "Bao", "Chiamaka", "Desmond", "Eitan", "Farah", "Goran",
               "Hana", "Ilse", "Jomo", "Katarzyna", "Mireille", "Nikolai", "Ifeoma", "Ragnhild", "Thiago")
SURNAMES = ("Abubakar", "Bergström", "Castellanos", "Dimitriou", "Ekwueme", "Fitzgerald", "Gonçalves", "Hoffmann",
            "Ivanova", "Jankowski", "Kimura", "Lindgren", "Mahlangu", "Novak", "Oyelaran", "Papadopoulos", "Quispe",
            "Rasmussen", "Sandoval", "Takahashi", "Uchenna", "Varga", "Wiśniewski", "Xu", "Yamamoto", "Zieliński",
            "Achterberg", "Bianchi", "Cárdenas", "Duarte", "Eze", "Forsberg", "Haddad", "Ibrahimović", "Jensen",
            "Kaur", "Lambert", "Nakamura", "Okafor", "Petrovic")
EMOJI = ("😀", "😂", "😊", "😍", "😢", "😴", "🙏", "👍", "👏", "👋", "❤️", "🎉", "🎂", "🌹", "🍀", "☀️", "❄️",
         "⚽", "🏆", "✈️", "🐱", "🐶", "🍕", "🍷", "☕", "🔥", "✅", "⭐", "🚗", "📷", "🏃‍♀️", "👍🏽", "🇫🇷")
# The words of generated links and addresses: none is a word of the robustness sets' links or addresses
WORDS = ("acme", "harbor", "orchard", "pixel", "quill", "meadow", "lantern", "tundra", "copper", "willow", "summit",
         "beacon", "ember", "fjord", "maple", "nimbus", "prairie", "saffron", "tide", "vertex")
TLDS = ("com", "org", "net", "fr", "io", "co.uk", "de", "edu", "info")


@dataclass(frozen=True)
class Augment:
    upper: float = 0.02
    title: float = 0.02
    heading: float = 0.1
    swap: float = 1.0
    emoji: float = 0.01
    join: float = 0.04
    seed: int = 1

    def identity(self) -> str:
        return f"augment v{AUGMENT_VERSION} {self}"


def augmented(source: PairSource, options: Augment) -> PairSource:
    """`source` with each chunk followed by its variants (see the module docstring)."""

    def read(size: int) -> Iterator[ParallelText]:
        for number, chunk in enumerate(source.chunks(size)):
            rng = random.Random(f"{options.seed}:{number}")
            extra = variants(chunk, options, rng)
            yield ParallelText(chunk.source + extra.source, chunk.target + extra.target)

    return PairSource(f"{source.identity} + {options.identity()}", read, source.valid)


def variants(pairs: ParallelText, options: Augment, rng: random.Random) -> ParallelText:
    out = ParallelText([], [])

    def add(source: str, target: str) -> None:
        out.source.append(source)
        out.target.append(target)

    for index, (source, target) in enumerate(zip(pairs.source, pairs.target, strict=True)):
        if rng.random() < options.upper:
            add(source.upper(), target.upper())
        if rng.random() < options.title:
            add(title_case(source, rng), target)
        if rng.random() < options.heading and (heading := as_heading(source, target, rng)):
            add(*heading)
        if rng.random() < options.swap and (swapped := swap_shared(source, target, rng)):
            add(*swapped)
        if rng.random() < options.emoji:
            emoji = rng.choice(EMOJI)
            add(f"{source} {emoji}", f"{target} {emoji}")
        if rng.random() < options.join:  # with one or two pairs drawn from the chunk (neighbours are often
            partners = [index] + [rng.randrange(len(pairs)) for _ in range(rng.choice((1, 2)))]  # variants)
            add(" ".join(pairs.source[i] for i in partners), " ".join(pairs.target[i] for i in partners))
    return out


def title_case(text: str, rng: random.Random) -> str:
    """Every word capitalized, or (half the time) every word but the small ones, as headlines do."""
    keep_small = rng.random() < 0.5
    words = text.split(" ")
    return " ".join(word if keep_small and i and word.lower() in SMALL_WORDS else word[:1].upper() + word[1:]
                    for i, word in enumerate(words))


HEADING_WORDS = 6


def as_heading(source: str, target: str, rng: random.Random) -> tuple[str, str] | None:
    """A short pair as a heading: no final period, the English in Title Case; None for a longer pair, a question
    or an exclamation."""
    source, target = source.strip(), target.strip()
    if not source or len(source.split()) > HEADING_WORDS or source.endswith(("?", "!")) or target.endswith(("?", "!")):
        return None
    source, target = source.removesuffix(".").rstrip(), target.removesuffix(".").rstrip()
    return (title_case(source, rng), target) if source and target else None


WORD = re.compile(r"[\w'-]+")


def shared_words(source: str, target: str) -> list[str]:
    """Words found exactly once in each side, identical, that are numbers or capitalized names ("Tom",
    "1990"), in the source's order."""
    source_words, target_words = WORD.findall(source), WORD.findall(target)
    return [word for word in source_words
            if (word[0].isupper() and word.isalpha() and len(word) > 1 or word.isdigit())
            and source_words.count(word) == 1 and target_words.count(word) == 1]


def swap_shared(source: str, target: str, rng: random.Random) -> tuple[str, str] | None:
    """The pair with up to two of its shared words replaced by entities or placeholders, or None."""
    words = shared_words(source, target)
    if not words:
        return None
    for slot, word in enumerate(words[:2], 1):
        if rng.random() < 1 / 3:  # mostly ⦅1⦆, ⦅2⦆ in order, as decoding numbers them; sometimes any
            english = french = PLACEHOLDER.format(slot if rng.random() < 0.7 else rng.randint(1, 9))
        else:
            english, french = random_entity(rng, number=word.isdigit())
        pattern = re.compile(rf"(?<![\w'-]){re.escape(word)}(?![\w'-])")
        source = pattern.sub(lambda _, text=english: text, source, count=1)
        target = pattern.sub(lambda _, text=french: text, target, count=1)
    return source, target


def random_entity(rng: random.Random, number: bool) -> tuple[str, str]:
    """(English, French) forms of a random entity; a number-like one where a number stood."""
    kinds = (random_number, random_price, random_time, random_phone, random_code) if number else \
        (random_url, random_email, random_code, random_name, random_emoji, random_number, random_phone)
    return rng.choice(kinds)(rng)


def random_number(rng: random.Random) -> tuple[str, str]:
    value = rng.choice((rng.randint(0, 99), rng.randint(100, 9999), rng.randint(1000, 10_000_000)))
    decimals = rng.choice((0, 0, 1, 2))
    english = f"{value:,}" + (f".{rng.randint(0, 10 ** decimals - 1):0{decimals}d}" if decimals else "")
    return english, french_number(english) if rng.random() < 0.5 else english


def french_number(english: str) -> str:
    """1,249.99 -> 1 249,99 (a no-break space between thousands, as French typography has it)."""
    return english.replace(",", "\u00a0").replace(".", ",")


def random_price(rng: random.Random) -> tuple[str, str]:
    amount, _ = random_number(rng)
    symbol = rng.choice(("$", "€", "£"))
    return f"{symbol}{amount}", f"{french_number(amount)} {symbol}"


def random_time(rng: random.Random) -> tuple[str, str]:
    hour, minute = rng.randint(0, 23), rng.choice((0, 15, 30, 45, rng.randint(0, 59)))
    english = f"{hour}:{minute:02d}"
    return english, (f"{hour} h {minute:02d}" if minute else f"{hour} h") if rng.random() < 0.5 else english


def random_phone(rng: random.Random) -> tuple[str, str]:
    digits = lambda n: "".join(rng.choice(string.digits) for _ in range(n))  # noqa: E731
    phone = rng.choice((f"+33 {rng.randint(1, 9)} {digits(2)} {digits(2)} {digits(2)} {digits(2)}",
                        f"0{rng.randint(1, 9)} {digits(2)} {digits(2)} {digits(2)} {digits(2)}",
                        f"+1 ({digits(3)}) {digits(3)}-{digits(4)}", f"{digits(3)}-{digits(4)}",
                        f"+44 {digits(2)} {digits(4)} {digits(4)}"))
    return phone, phone


def random_code(rng: random.Random) -> tuple[str, str]:
    letters = lambda n: "".join(rng.choice(string.ascii_uppercase) for _ in range(n))  # noqa: E731
    mixed = lambda n: "".join(rng.choice(string.ascii_letters + string.digits) for _ in range(n))  # noqa: E731
    code = rng.choice((f"{letters(2)}{rng.randint(100, 9999)}", f"{mixed(4)}-{mixed(4)}",
                       f"{rng.randint(0, 9)}.{rng.randint(0, 20)}.{rng.randint(0, 9)}",
                       f"{letters(3)}-{rng.randint(2000, 2030)}-{rng.randint(0, 9999):04d}",
                       f"{letters(1)}{rng.randint(1, 99)}", f"{rng.randint(1, 40)}{letters(1)}", mixed(6).upper()))
    return code, code


def random_url(rng: random.Random) -> tuple[str, str]:
    scheme = rng.choice(("https://", "http://", ""))
    www = "www." if not scheme or rng.random() < 0.5 else ""  # a link without a scheme starts with www.
    host = f"{www}{rng.choice(WORDS)}{rng.choice(('', '-' + rng.choice(WORDS)))}.{rng.choice(TLDS)}"
    path = "".join(f"/{rng.choice(WORDS)}" for _ in range(rng.randint(0, 3)))
    query = rng.choice(("", f"?id={rng.randint(1, 9999)}", f"?lang=en&q={rng.choice(WORDS)}"))
    url = scheme + host + path + query
    return url, url


def random_email(rng: random.Random) -> tuple[str, str]:
    first = rng.choice(FIRST_NAMES).lower().encode("ascii", "ignore").decode() or "contact"
    local = first + rng.choice(("", f".{rng.choice(WORDS)}", f"_{rng.randint(1, 99)}", str(rng.randint(1, 99))))
    email = f"{local}@{rng.choice(WORDS)}.{rng.choice(TLDS)}"
    return email, email


def random_name(rng: random.Random) -> tuple[str, str]:
    name = rng.choice(FIRST_NAMES) + (f" {rng.choice(SURNAMES)}" if rng.random() < 0.8 else "")
    return name, name


def random_emoji(rng: random.Random) -> tuple[str, str]:
    emoji = rng.choice(EMOJI)
    return emoji, emoji
