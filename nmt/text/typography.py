"""French typography of a translation the model wrote: elisions joined, and the French renderings of times, numbers,
amounts, units, ordinals and decades that nmt.text.protect and nmt.text.conventions put in.

    joined_elisions("l' Union et qu' il")   ->  "l'Union et qu'il"

Europarl's French, the bulk of the training data, writes a space after an elided word in about one elision in
thirteen ("l' Union", "qu' il"); the models learned it and write it in news too. French writes none.
"""

from __future__ import annotations

import re

# An English month's name, in full or abbreviated ("May" never is)
SHORT_MONTHS = "Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sept?|Oct|Nov|Dec"
ENGLISH_MONTHS = "January|February|March|April|May|June|July|August|September|October|November|December|" \
    + SHORT_MONTHS
# a month's name before an ordinal ("May 3rd") or after it ("the 3rd of May"): a date, not a rank
MONTH = f"(?:{ENGLISH_MONTHS})"
MONTH_BEFORE = re.compile(MONTH + r"\.?\s+(?:the\s+)?(?:\d+(?:st|nd|rd|th)?\s*(?:,|&|and|to|-)\s*(?:the\s+)?)*$")
MONTH_AFTER = re.compile(r"\s+(?:of\s+)?" + MONTH + r"\b")

# An elided word (l', d', qu', jusqu', ...) and the spaces after it, before a letter; not a letter quoted
# ("la lettre 'l' est"): the elided word starts a word
ELIDED_THEN_SPACE = re.compile(
    r"(?<![\w'\u2019])((?:[cdjlmnst]|qu|jusqu|lorsqu|puisqu|quoiqu|presqu|aujourd)['\u2019]) +(?=[^\W\d_])",
    re.IGNORECASE)


def joined_elisions(text: str) -> str:
    """`text` without the spaces after its elided words."""
    return ELIDED_THEN_SPACE.sub(r"\1", text)


# The mark a French ordinal carries after its digits (2e, 1er, 1re, 2nde, 3ème, 4ᵉ)
FRENCH_ORDINAL_MARK = r"(?:e|er|re|ère|ème|eme|è|ᵉ|nde?)(?!\w)"


CURRENCIES = {"$": ("dollar", "de "), "\u20ac": ("euro", "d'"), "\u00a3": ("livre", "de ")}


SCALES = {"bn": "milliard", "m": "million", "mn": "million", "tn": "billion", "M": "million", "B": "milliard"}


# Bytes as French writes them: octets (1,5 Go, 500 Mo), not bytes (GB, MB); glued to a number (GLUED_UNIT) or
# after one (nmt.text.conventions.french_bytes)
FRENCH_BYTES = {"kB": "ko", "KB": "Ko", "MB": "Mo", "GB": "Go", "TB": "To", "PB": "Po", "KiB": "Kio", "MiB": "Mio",
                "GiB": "Gio", "TiB": "Tio"}


def french_time(match: re.Match) -> str | None:
    """CLOCK_TIME's match as French writes a time ("7 h", "13 h", "10 h 30", "15 h EST"); None for an hour over
    12."""
    hour, minutes, half = int(match.group(1)), match.group(2), match.group(3).lower()
    if not 1 <= hour <= 12:
        return None
    hour = hour % 12 + (12 if half == "p" else 0)
    return french_clock(hour, minutes, match.group(4))


# North America's time zones without their season, which French writes out: "15 h ET" reads "15 h and"
ZONE_WORDS = {"ET": "heure de l'Est", "CT": "heure du Centre", "MT": "heure des Rocheuses", "PT": "heure du Pacifique"}


def french_clock(hour: int, minutes: str | None, zone: str | None = None) -> str:
    """A time as French writes it: "7 h", "22 h 30" (no minutes where they are none or 00), its time zone after
    it as English wrote it ("15 h EST", "10 h UTC") or in words ("15 h (heure de l'Est)" for "3 PM ET")."""
    clock = f"{hour} h" + (f" {minutes}" if minutes and minutes != "00" else "")
    if not zone:
        return clock
    words = ZONE_WORDS.get(zone.strip("()"))  # a zone is in capitals (nmt.text.protect.TIME_ZONE)
    return f"{clock} ({words})" if words else f"{clock} {zone}"


TIME_WORDS = re.compile(r"\b(?:at|from|to|until|till|by|before|after|between|and|since|around|about)\s+$",
                        re.IGNORECASE)


def french_day_time(match: re.Match) -> str | None:
    """DAY_TIME's match as French writes a time ("20 h", "9 h 30"), where a word before it says it is one ("at",
    "from", "until"); None otherwise, or for an hour over 23."""
    hour, minutes = int(match.group(1)), match.group(2)
    if hour > 23 or not TIME_WORDS.search(match.string, 0, match.start()):
        return None
    return french_clock(hour, minutes, match.group(3))


def french_number(digits: str) -> str:
    """An English number as French writes it: 2.5 -> 2,5 (a comma with one to two digits after it, as in 2,5,
    is taken for a decimal point only where it cannot be a thousands separator)."""
    if re.fullmatch(r"\d{1,3}(?:,\d{3})+(?:\.\d+)?", digits):
        whole, _, fraction = digits.partition(".")
        return whole.replace(",", "\u202f") + ("," + fraction if fraction else "")
    return digits.replace(".", ",")


def french_money(match: re.Match) -> str:
    currency, before = CURRENCIES[match.group(1)]
    amount, scale = match.group(2), SCALES[match.group(3)]
    thousands = re.fullmatch(r"\d{1,3}(?:,\d{3})+(?:\.\d+)?", amount)
    plural = "s" if float(amount.replace(",", "") if thousands else amount.replace(",", ".")) >= 2 else ""
    return f"{french_number(amount)} {scale}{plural} {before}{currency}s"


def french_unit(match: re.Match) -> str:
    return f"{french_number(match.group(1))} {FRENCH_BYTES.get(match.group(2), match.group(2))}"


# An imperial unit's French words, singular and plural (under 2 singular, as French counts)
IMPERIAL_UNITS = {"lb": ("livre", "livres"), "lbs": ("livre", "livres"), "oz": ("once", "onces"),
                  "ft": ("pied", "pieds"), "sq ft": ("pied carré", "pieds carrés"),
                  "tsp": ("cuillère à café", "cuillères à café"), "tbsp": ("cuillère à soupe", "cuillères à soupe"),
                  "yd": ("yard", "yards"), "yds": ("yard", "yards"), "gal": ("gallon", "gallons"),
                  "mi": ("mile", "miles"), "mph": ("mile à l'heure", "miles à l'heure")}


def counted(amount: str, unit: tuple[str, str]) -> str:
    """An English number and a unit's French words, singular or plural by the number: "1,5 livre", "3 pieds"."""
    value = float(amount.replace(",", ""))
    return f"{french_number(amount)} {unit[0] if value < 2 else unit[1]}"


def french_imperial_unit(match: re.Match) -> str:
    unit = re.sub(r"sq\.?\s?ft", "sq ft", match.group(2))
    return counted(match.group(1), IMPERIAL_UNITS[unit])


def french_feet_and_inches(match: re.Match) -> str:
    return f"{counted(match.group(1), IMPERIAL_UNITS['ft'])} {counted(match.group(2), ('pouce', 'pouces'))}"


def french_ordinal(match: re.Match) -> str:
    """ORDINAL's match as French writes it: "2e", "1er"; in a date the day alone ("9"), the first "1er"."""
    digits = match.group(1)
    if digits.lstrip("0") == "1":
        return "1er"
    in_date = (MONTH_BEFORE.search(match.string, 0, match.start())
               or MONTH_AFTER.match(match.string, match.end()))
    return digits if in_date else f"{digits}e"


def french_decade(match: re.Match) -> str:
    """DECADE's match as French writes it: "années 1980", "années 90"."""
    return f"années {match.group(1)}"


# The article the model writes before a placeholder it takes for a singular noun, where it comes back as a
# decade (french_decade): "dans la ⦅1⦆" -> "dans la années 1980" -> "dans les années 1980"; "en ⦅1⦆", as a year
# takes it, is "dans les" before a decade, as is "à ⦅1⦆", the model's "in ⦅1⦆" ("augmenté à années 2010")
SINGULAR_BEFORE_DECADE = re.compile(r"\b(de la|à la|à l['\u2019]|du|au|la|le|de|l['\u2019]|en|à)\s*(?=années \d)",
                                    re.IGNORECASE)


PLURAL_ARTICLES = {"de la": "des", "à la": "aux", "à l'": "aux", "à l\u2019": "aux", "du": "des", "au": "aux",
                   "la": "les", "le": "les", "de": "des", "l'": "les", "l\u2019": "les", "en": "dans les",
                   "à": "dans les"}


def plural_article(match: re.Match) -> str:
    article = match.group(1)
    plural = PLURAL_ARTICLES[article.lower()]
    return (plural.capitalize() if article[0].isupper() else plural) + " "
