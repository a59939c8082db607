"""French writing conventions applied to a translation, from what its English source says: numbers, amounts,
percentages, dates, elisions and punctuation as a French reader expects them.

    setting = Typography("fr")
    render_sentence("The total is €1,299.", "Le total est1,299 €.", setting)  ->  "Le total est 1 299 €."
    render_sentence("On March 3, 2025.", "Le 3 2025 mars.", setting)          ->  "Le 3 mars 2025."
    punctuate('Il a dit: "Je serai là."', setting)                             ->  'Il a dit : « Je serai là. »'

A model writes numbers as its training data did, which is both ways ("1,500" is 1.5 in French, "1 500" is fifteen
hundred): every number of the source that carries a thousands comma or a decimal point is found in the translation,
however the model grouped it, and written the French way; so is an amount with its currency ("1 299 €", once), a
percentage ("12,5 %"), a date ("3 mars 2025") and a quarter ("T3 2024"). What cannot be read for sure stays as
written: a version ("2.5.1"), a score ("3-1"), a code (those are behind placeholders: nmt.text.protect), a date in
digits whose order is unknown (3/4/2025 is March or April: flagged by nmt.decoding.translate); one whose day shows
it goes to the model day first (day_first_dates: "12/25/2024" -> "25/12/2024"), an abbreviated month written out
(english_months: "Dec. 24" -> "December 24"). Then French spacing: a no-break space inside « » and before ":", a
narrow one before ";", "!" and "?" (fr-CA: none there), and elisions the model left out ("le ordinateur" ->
"l'ordinateur", "de les" -> "des").

`Typography("none")` changes nothing: the model's own text. Links, addresses and codes of the source are never
touched, wherever they stand in the translation.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal

from nmt.text.names import NAME_WORDS, couples_written_out
from nmt.text.protect import BACKTICKED, EMAIL, PATH, URL, verbatim_spans
from nmt.text.typography import ENGLISH_MONTHS, FRENCH_BYTES, SHORT_MONTHS

TYPOGRAPHIES = ("fr", "fr-CA", "none")
APOSTROPHES = ("keep", "straight", "curly")
NBSP, NNBSP = "\u00a0", "\u202f"  # no-break space; narrow no-break space


@dataclass(frozen=True)
class Typography:
    """How a translation is written: `name` fr (France: a narrow no-break space before ; ! ?), fr-CA (Canada:
    none there), none (the model's text as it is); `apostrophe` keep (as the model wrote each: references and
    users' texts use either, and making them one kind cost 0.45 BLEU on europarl:test, whose references are
    curly, and 3 to 8 on the sets whose are straight, benchmarks/CONVENTIONS.md), straight (') or curly (’)."""

    name: str = "fr"
    apostrophe: str = "keep"

    def __post_init__(self) -> None:
        if self.name not in TYPOGRAPHIES:
            raise ValueError(f"typography must be {', '.join(TYPOGRAPHIES)}, not {self.name!r}")
        if self.apostrophe not in APOSTROPHES:
            raise ValueError(f"apostrophe must be {', '.join(APOSTROPHES)}, not {self.apostrophe!r}")

    @property
    def elided(self) -> str:
        """The apostrophe of an elision the rules write: the setting's, straight where it keeps the model's."""
        return "’" if self.apostrophe == "curly" else "'"

    @property
    def active(self) -> bool:
        return self.name != "none"

    @property
    def thousands(self) -> str:
        return NNBSP if self.name == "fr" else NBSP

    @property
    def before_high_marks(self) -> str:  # before ; ! ?
        return NNBSP if self.name == "fr" else ""


NO_TYPOGRAPHY = Typography("none")


# ---- numbers ------------------------------------------------------------------------------------------------

# An English number with a thousands comma or a decimal point: 1,299  1,299.99  3.5  0.25; not a version (2.5.1),
# nor one glued to letters (a code) or inside a longer run of digits and dots
GROUPED_NUMBER = re.compile(r"(?<![\w.,\u2019'])(\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+\.\d+)(?![\w\u00b2\u00b3]|[.,]\d)")
CURRENCY_SYMBOLS = {"$": "$", "US$": "$ US", "C$": "$ CA", "A$": "$ AU", "€": "€", "£": "£", "¥": "¥"}
# a symbol's currency after an amount in words: "240 millions de dollars", "2,5 milliards d'euros"
CURRENCY_WORDS = {"$": "de dollars", "$ US": "de dollars américains", "$ CA": "de dollars canadiens",
                  "$ AU": "de dollars australiens", "€": "d'euros", "£": "de livres", "¥": "de yens"}
SCALE_WORDS = {"million": "million", "millions": "million", "billion": "milliard", "billions": "milliard",
               "trillion": "billion", "trillions": "billion", "thousand": "mille"}
# a currency in words after an amount, as a translation may write it ("dollars US", "livres sterling")
CURRENCY_NAMES = r"(?:dollars?|euros?|livres?|yens?)\b(?:\s(?:US|sterling|américains?|canadiens?|australiens?)\b)?"
CURRENCY_SIGN = r"(?<![\w.,])(US\$|C\$|A\$|[$€£¥])"  # an amount's sign, not inside a word or number
AMOUNT = re.compile(CURRENCY_SIGN + r"\s?(\d+(?:,\d{3})*(?:\.\d+)?)"
                    r"(?:\s(million|billion|trillion|thousand)s?\b)?(?![\w]|[.,]\d)")
PERCENT = re.compile(r"(?<![\w.,])(\d+(?:,\d{3})*(?:\.\d+)?)\s?(%|percent\b|per cent\b)")
DEGREES = re.compile(r"(?<![\w.,])([-\u2212]?\d+(?:\.\d+)?)\s?°\s?([CF])\b")


def french_digits(english: str, typography: Typography) -> str:
    """1,299.99 -> 1 299,99 with the setting's thousands space; 3.5 -> 3,5."""
    whole, _, fraction = english.partition(".")
    whole = whole.replace(",", "")
    if len(whole) > 4 or "," in english:  # French groups 5 digits and more; 4 where English did
        whole = re.sub(r"(?<=\d)(?=(\d{3})+$)", typography.thousands, whole)
    return whole + ("," + fraction if fraction else "")


def number_body(english: str, grouped: bool = False) -> str:
    """A pattern of the number of `english` as a translation may write it: its digit groups joined by any of , .
    and the spaces (`grouped`) or also by nothing, its decimals after . or ,."""
    whole, _, fraction = english.partition(".")
    groups = whole.split(",") if "," in whole else re.findall(r"\d{1,3}(?=(?:\d{3})*$)", whole)
    separator = r"[,.\s\u00a0\u202f]" if grouped else r"[,.\s\u00a0\u202f]?"
    return separator.join(groups) + (r"[.,]" + fraction if fraction else "")


def number_in_translation(english: str, grouped: bool = False) -> re.Pattern:
    """number_body's number, not inside a longer one."""
    return re.compile(r"(?<![\d.,])" + number_body(english, grouped) + r"(?![\d]|[.,]\d)")


# Bytes after a number as French writes them (typography.FRENCH_BYTES), and the model's slip "5 mB/s" (millibytes)
# for "5 MB/s"
MISCASED_BYTES = {"mB": "MB"}
BYTES_AFTER_NUMBER = re.compile(r"(?<=\d)[ \u00a0\u202f]?(" + "|".join([*FRENCH_BYTES, *MISCASED_BYTES]) + r")\b")


def french_bytes(text: str) -> str:
    return BYTES_AFTER_NUMBER.sub(lambda match: NBSP + FRENCH_BYTES[MISCASED_BYTES.get(match.group(1),
                                                                                       match.group(1))], text)


# Ordinals as French typography writes them: "2e", not "2ème" or "2è"; the first "1er", or "1re" after a feminine
# determiner, never "1e" ("la 1e femme" -> "la 1re femme", "venu 1ème" -> "venu 1er")
LONG_ORDINAL = re.compile(r"(?<![\w,.])(\d+)(?:ème|eme|è)(?!\w)")
FIRST = re.compile(r"(?<![\w,.])((?:(?:la|une|sa|ma|ta|cette|notre|votre|leur)\s+)?)1e(?![\w+-]|\.\d)", re.IGNORECASE)


def french_ordinals(text: str) -> str:
    text = LONG_ORDINAL.sub(r"\1e", text)
    return FIRST.sub(lambda match: match.group(1) + ("1re" if match.group(1) else "1er"), text)


# "million" and "milliard" stay singular under 2 in French ("1,5 million"); the model made them plural
UNDER_TWO_SCALE = re.compile(r"(?<![\d,.\u202f\u00a0])([01](?:,\d+)?)(\s)(million|milliard)s\b")


def french_scales(text: str) -> str:
    return UNDER_TWO_SCALE.sub(r"\1\2\3", text)


# "3x plus rapide" (three times faster) as French writes it: "3 fois plus rapide"
TIMES_MORE = re.compile(r"(?<![\w,.])(\d+(?:,\d+)?)\s?[x×]\s+(?=(?:plus|moins|mieux|autant)\b)")
# A range of counts before a word ("5-10 minutes", at most 3 digits, the first the smaller and not 0: not a score
# "3-1", "lost 0-1", "a 1-2 defeat", a year "2010-2012" nor a telephone number), which French writes "5 à 10 minutes"
RANGE_START = r"(?<![\w,.\-–/])"  # not inside a longer number, a date or another range
COUNT_RANGE = re.compile(RANGE_START + r"([1-9]\d{0,2})\s?[-–]\s?(\d{1,3})(?=\s+([^\W\d_]+))")
NOT_COUNTED = {"in", "at", "on", "to", "for", "with", "and", "or", "the", "a", "an", "by", "from", "of", "after",
               "before", "against", "win", "wins", "victory", "defeat", "loss", "lead", "draw", "vote", "votes",
               "home", "away", "score", "scoreline", "decision", "majority", "ruling", "split"}
# "open 24/7": "24 h/24, 7 j/7"
ROUND_THE_CLOCK = re.compile(r"(?<![\w/.,])24/7(?![\w/]|[.,]\d)")


def is_count_range(low: str, high: str, word: str) -> bool:
    """Whether COUNT_RANGE's match (its numbers and the word after them) counts something, not a score."""
    return int(low) < int(high) and word.lower() not in NOT_COUNTED


# An amount's range ("$10–$20", "€80-120"), which the model wrote "10 $ 20 $" and "80 € à120 €"; with a scale
# ("$5-10 million", "$1.5–2bn") it read five dollars ("5 $ à 10 millions de dollars"): written out, "5 to 10 million
# dollars", it writes "5 à 10 millions de dollars"
ENGLISH_SCALES = {"m": "million", "mn": "million", "M": "million", "bn": "billion", "B": "billion", "tn": "trillion"}
MONEY_RANGE = re.compile(r"(?<![\w.,])([$€£])(\d+(?:[.,]\d+)*)\s?[-–—]\s?\1?(\d+(?:[.,]\d+)*)(?![\w.,]?\d)"
                         rf"(?:\s?(million|billion|trillion|{'|'.join(ENGLISH_SCALES)})\b)?")
ENGLISH_CURRENCIES = {"$": "dollars", "€": "euros", "£": "pounds"}


# An amount in thousands ("$85k", "€1.5K", "$5-10k"): the model read "$85k a year" as 85 dollars
THOUSANDS_NUMBER = r"(\d{1,3}(?:\.\d{1,3})?)\s?"
THOUSANDS_END = r"[kK](?!\w|-[^\W\d_])"
THOUSANDS = re.compile(CURRENCY_SIGN + THOUSANDS_NUMBER + THOUSANDS_END)
THOUSANDS_RANGE = re.compile(CURRENCY_SIGN + THOUSANDS_NUMBER + r"[kK]?\s?([-–—])\s?(?:\1)?"
                             + THOUSANDS_NUMBER + THOUSANDS_END)


def in_thousands(number: str) -> str:
    value = Decimal(number) * 1000
    return f"{int(value):,}" if value == value.to_integral_value() else f"{value.normalize():,f}"


def english_thousands(english: str) -> str:
    """`english` with its amounts in thousands written out ("$85k" -> "$85,000", "€1.5K" -> "€1,500", "$5-10k" ->
    "$5,000-$10,000"), which the model and the amount rules (render_numbers) take as any amount."""
    english = THOUSANDS_RANGE.sub(lambda m: f"{m[1]}{in_thousands(m[2])}{m[3]}{m[1]}{in_thousands(m[4])}", english)
    return THOUSANDS.sub(lambda m: m[1] + in_thousands(m[2]), english)


# A reduction in price, "50% off" or "$10 off", which the model read as a share ("Up to 50% off all items!" ->
# "Jusqu'à 50 % de tous les éléments !") or a motion ("Get $10 off" -> "Descendez 10 $"); written as a discount,
# it translates ("Jusqu'à 50 % de rabais sur tous les éléments !", "Obtenez une remise de 10 $"). Not a distance
# from a price's peak ("trading 5% off its high"), a cut ("slash 20% off the budget"), nor the end of a range.
OFF = re.compile(r"(?<![\w.,\-–/])(?:(?P<copula>\b(?:is|are|was|were|be|been|now)\s+)|(?P<article>\b(?:an?|the)\s+"
                 r"(?:(?:extra|additional|further|flat|instant)\s+)?)|(?P<extra>\b(?:extra|additional|further)\s+))?"
                 r"(?P<amount>(?:US\$|C\$|A\$|[$€£¥])\d+(?:[.,]\d+)*|\d+(?:\.\d+)?\s?(?:%|percent\b|per cent\b))"
                 r"\s+off\b(?![-'’])(?P<object>(?=\s+(?!(?:today|now|tonight|until|till|through|thru|for|when|with|at|"
                 r"if|during|in|and|or|but|sitewide|storewide|only|while|before|after|from|to|by|plus|next|this\s+"
                 r"(?:week|weekend|month|year|season|morning|evening))\b)[\w$€£¥]))?")
NOT_PRICE = re.compile(r"(?:\b(?:trading|traded|trades|fell|dropped|slipped|down|closed|ended|slash\w*|cut|cuts|"
                       r"cutting|carv\w+|shav\w+|knock\w*|wip\w+|trim\w*|chop\w*|lop\w*|shed\w*)|\d\s+to)\s+$",
                       re.IGNORECASE)
PEAK_AFTER = re.compile(r"\s+(?:its|their|the|a)\s+(?:peak|high|highs|record|top|low|lows|level|levels)\b",
                        re.IGNORECASE)


def english_discounts(english: str) -> str:
    """`english` with its reductions in price as discounts: "Up to 50% off" -> "Up to a 50% discount", "Get $10 off
    orders" -> "Get a $10 discount on orders", "Everything is 30% off." -> "Everything is reduced by 30%."."""

    def discount(match: re.Match) -> str:
        if NOT_PRICE.search(english[:match.start()]) or PEAK_AFTER.match(english, match.end()):
            return match.group()
        amount, on = match.group("amount"), " on" if match.group("object") is not None else ""
        if match.group("copula"):
            return f"{match.group('copula')}reduced by {amount}"
        if match.group("article"):
            return f"{match.group('article')}{amount} discount{on}"
        article = "an" if match.group("extra") or re.match(r"\D?(?:8|11|18)(?!\d)|\D?8\d", amount) else "a"
        opens = not english[:match.start()].strip() or english[:match.start()].rstrip()[-1] in ".!?\"«("
        return f"{article.capitalize() if opens else article} {match.group('extra') or ''}{amount} discount{on}"

    return OFF.sub(discount, english)


def english_ranges(english: str) -> str:
    """`english` with its ranges of counts and amounts written with "to", which the model translates as French
    writes them ("5 à 10 minutes", "10 $ à 20 $", "5 à 10 millions de dollars"): with a dash it wrote "510
    minutes" for "5–10 minutes"."""

    def amounts(match: re.Match) -> str:
        sign, low, high, scale = match.groups()
        if scale:
            return f"{low} to {high} {ENGLISH_SCALES.get(scale, scale)} {ENGLISH_CURRENCIES[sign]}"
        return f"{sign}{low} to {sign}{high}"

    def counts(match: re.Match) -> str:
        return f"{match.group(1)} to {match.group(2)}" if is_count_range(*match.groups()) else match.group()

    return COUNT_RANGE.sub(counts, MONEY_RANGE.sub(amounts, english))


def french_counts(source: str, translation: str) -> str:
    """"3x plus" as "3 fois plus", a range of counts the source has as "N à M", "24/7" as "24 h/24, 7 j/7"."""
    translation = TIMES_MORE.sub(r"\1 fois ", translation)
    translation = re.sub(r"(?<=\d) ?à ?(?=\d)", " à ", translation)  # the model's "3 à2"
    for low, high in {(int(a), int(b)) for a, b, word in COUNT_RANGE.findall(source) if is_count_range(a, b, word)}:
        translation = re.sub(rf"{RANGE_START}{low}\s?[-–]\s?{high}(?=\s+[^\W\d_])", f"{low} à {high}", translation)
    if ROUND_THE_CLOCK.search(source):
        translation = ROUND_THE_CLOCK.sub(f"24{NBSP}h/24, 7{NBSP}j/7", translation)
    return translation


def render_numbers(source: str, translation: str, typography: Typography) -> str:
    """Each number of `source` that has a thousands comma or a decimal point, written the French way in
    `translation` wherever the model put it; amounts, percentages and temperatures with their signs as French
    places them."""
    for match in AMOUNT.finditer(source):
        translation = render_amount(match, translation, typography)
    for match in PERCENT.finditer(source):
        digits = match.group(1)
        pattern = re.compile(number_in_translation(digits).pattern + r"\s?(?:%|pour\s?cent\b|p\.\s?100)")
        translation = pattern.sub(lambda _, d=digits: french_digits(d, typography) + NBSP + "%", translation)
    for match in DEGREES.finditer(source):
        value, scale = match.group(1).replace("\u2212", "-"), match.group(2)
        number = value.lstrip("-")
        pattern = re.compile(r"(?<![\d.,])([-\u2212]?)" + number_body(number) + r"\s?°\s?" + scale + r"\b")
        translation = pattern.sub(lambda m, n=number, s=scale: m.group(1) + french_digits(n, typography) + NBSP
                                  + "°" + s, translation)
    numbers = [match.group(1) for match in GROUPED_NUMBER.finditer(source) if not is_version(match)]
    for digits in dict.fromkeys(numbers):
        french = french_digits(digits, typography)
        times = len(re.findall(r"(?<![\d.,])" + re.escape(digits) + r"(?![\d]|[.,]\d)", source))
        grouped = number_in_translation(digits, grouped=True)
        translation, found = grouped.subn(lambda _, f=french: f, translation, count=times)
        if not found:  # written without a separator ("1299"): once, where a year of the same digits cannot be
            translation = number_in_translation(digits).sub(lambda _, f=french: f, translation, count=1)
    return translation


# A name or word before a number with a decimal point that makes it a version: "Python 3.13", "version 2.1", "v1.5"
VERSION_BEFORE = re.compile(r"(?:\b[A-Z][\w+#-]*|\b(?:[Vv]ersion|[Rr]elease|v)) ?$")
# Capitalized words before a number that opens a sentence with a quantity, not a name with its version: "Rated
# 4.5 out of 5", "About 2.5 million", "Over 3.5 billion" (and any word in -ed or -ly: "Priced", "Nearly")
QUANTITY_WORDS = frozenset("about around almost approximately over under only just some up down at least more less "
                           "than nearly roughly costs weighs measures scored ranked".split())
# A word before a number with a decimal point that makes it a part of a text, which French numbers with a point
# too ("la section 4.2", not "4,2": a decimal): "section 4.2", "see figures 3.1 and 3.2", "§ 5.1"
SECTION_BEFORE = re.compile(
    r"(?:\b(?:[Ss]ection|[Cc]hapter|[Ff]igure|[Ff]ig\.|[Tt]able|[Ss]tep|[Pp]aragraph|[Pp]art|[Aa]rticle|[Aa]ppendix|"
    r"[Aa]nnex|[Cc]lause|[Rr]ule|[Ee]xercise|[Ll]esson|[Ee]quation|[Ee]q\.|[Tt]heorem|[Ll]emma|[Ee]xample|"
    r"[Ll]isting|[Ff]ootnote|[Ii]tem)s?|§§?)"
    r" ?(?:\d+(?:\.\d+)+(?:, | and | or | to | through |-|–))*$")


def is_version(match: re.Match) -> bool:
    """Whether GROUPED_NUMBER's `match` is a version or a section's number rather than a number with decimals."""
    before = match.string[:match.start()]
    if "," in match.group(1):
        return False
    if SECTION_BEFORE.search(before):
        return True
    word = re.search(r"(\w+) ?$", before)
    if word and (word.group(1) in MONTHS or word.group(1).lower() in QUANTITY_WORDS
                 or word.group(1).lower().endswith(("ed", "ly"))):
        return False
    return VERSION_BEFORE.search(before) is not None


def render_amount(match: re.Match, translation: str, typography: Typography) -> str:
    """`translation` with the amount of AMOUNT's `match` written once as French does: "1 299 €", "5 $",
    "240 millions de dollars"; the symbol the model put before or after the number, or twice, goes."""
    symbol = CURRENCY_SYMBOLS[match.group(1)]
    digits, scale = match.group(2), match.group(3)
    number = number_body(digits) + r"(?![\d]|[.,]\d)"
    symbols = r"(?:US\s?\$|\$\s?US|C\$|\$\s?CA|A\$|\$\s?AU|[$€£¥])"
    if scale:
        french_scale = SCALE_WORDS[scale]
        plural = "s" if float(digits.replace(",", "")) >= 2 and french_scale != "mille" else ""
        rendered = f"{french_digits(digits, typography)} {french_scale}{plural} {CURRENCY_WORDS[symbol]}"
        # the model's version: a symbol before or after, the scale in French or English, the currency in words
        pattern = (rf"(?:{symbols}\s?)?{number}\s?(?:{symbols}\s?)?(?:de\s)?"
                   r"(?:millions?|milliards?|billions?|mille|trillions?|thousands?|[mM]\b|bn\b)?"
                   rf"(?:\s?{symbols})?(?:\s(?:de\s|d['’]\s?){CURRENCY_NAMES})?")
    else:
        rendered = french_digits(digits, typography) + NBSP + symbol
        pattern = rf"(?:{symbols}\s?)?{number}(?:(?:\s?{symbols}){{1,2}}|\s{CURRENCY_NAMES})?"
    found = re.compile(r"(?<![\d.,])" + pattern + r"(?![\d]|[.,]\d)")

    def replace(hit: re.Match) -> str:
        space = " " if hit.start() and hit.string[hit.start() - 1].isalpha() else ""  # "est1,299" -> "est 1 299"
        return space + rendered

    return found.sub(replace, translation, count=1)


# ---- dates --------------------------------------------------------------------------------------------------

MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
          "November", "December")
FRENCH_MONTHS = ("janvier", "février", "mars", "avril", "mai", "juin", "juillet", "août", "septembre", "octobre",
                 "novembre", "décembre")
MONTH_NAMES = {**{name.lower(): i for i, name in enumerate(MONTHS)},
               **{name.lower()[:3]: i for i, name in enumerate(MONTHS)}, "sept": 8}
ENGLISH_MONTH = rf"({ENGLISH_MONTHS})\.?"
DAY = r"(\d{1,2})(?:st|nd|rd|th)?"
YEAR = r"(\d{4})"
# March 3, 2025 / March 3rd / March 3 2025
MONTH_DAY = re.compile(rf"\b{ENGLISH_MONTH}\s+{DAY}\b(?:,?\s+{YEAR}\b)?")
# 3 March 2025 / 3rd of March, 2025 / the 3rd of March
DAY_MONTH = re.compile(rf"(?<![\w.,]){DAY}\s+(?:of\s+)?{ENGLISH_MONTH}\b(?:,?\s+{YEAR}\b)?")


@dataclass(frozen=True)
class Date:
    day: int
    month: int  # 0-11
    year: str | None

    @property
    def french(self) -> str:
        day = "1er" if self.day == 1 else str(self.day)
        return f"{day} {FRENCH_MONTHS[self.month]}" + (f" {self.year}" if self.year else "")


def source_dates(source: str) -> list[Date]:
    """The dates of `source` written with the month in words (a date in digits is left alone: 3/4 is March
    or April)."""
    dates = []
    for pattern, day_group, month_group in ((MONTH_DAY, 2, 1), (DAY_MONTH, 1, 2)):
        for match in pattern.finditer(source):
            day, month = int(match.group(day_group)), MONTH_NAMES[match.group(month_group).lower().rstrip(".")]
            if 1 <= day <= 31:
                dates.append(Date(day, month, match.group(3)))
    return dates


# A date in digits, month/day/year or day/month/year; its order is sure where one of the first two is over 12
DIGIT_DATE = re.compile(r"(?<![\d/.,-])(\d{1,2})/(\d{1,2})/(\d{4}|\d{2})(?![\d/]|[.,]\d)")


def dates_of_unknown_order(source: str) -> list[str]:
    """The dates in digits of `source` that may be day or month first (05/12/2024), as written."""
    return [match.group() for match in DIGIT_DATE.finditer(source)
            if int(match.group(1)) != int(match.group(2)) and 1 <= int(match.group(1)) <= 12
            and 1 <= int(match.group(2)) <= 12]


# Words that open an English sentence: a period before one may end the sentence
SENTENCE_OPENERS = "The|A|An|I|He|She|It|We|You|They|This|That|There|But|And|In|On|So|Then"

# A month abbreviated in a date: "Dec. 24", "Dec 24th", "24 Dec. 2025", "the 3rd of Sept."
SHORT_MONTH = rf"({SHORT_MONTHS})(\.?)"
SHORT_MONTH_FIRST = re.compile(rf"(?<![\w.]){SHORT_MONTH}(?=\s+\d{{1,2}}(?:st|nd|rd|th)?(?![\w:.,]\d|\d))")
SHORT_MONTH_AFTER_DAY = re.compile(rf"(?<![\w.,])(\d{{1,2}}(?:st|nd|rd|th)?\s+(?:of\s+)?){SHORT_MONTH}(?!\w)"
                                   rf"(?=(\s*$|\s+(?:{SENTENCE_OPENERS})\b)?)")


def english_months(english: str) -> str:
    """`english` with the months of its dates written out: with "Dec. 24" the model lost the words around the date
    ("closes at noon on Dec. 24" -> "ferme au 24 décembre"), with "December 24" it keeps them. A period that also
    ends the sentence stays ("on 24 Dec." -> "on 24 December.")."""

    def month(short: str) -> str:
        return MONTHS[MONTH_NAMES[short.lower()]]

    english = SHORT_MONTH_FIRST.sub(lambda match: month(match.group(1)), english)
    return SHORT_MONTH_AFTER_DAY.sub(lambda match: match.group(1) + month(match.group(2))
                                     + ("." if match.group(3) and match.group(4) is not None else ""), english)


# ---- days and hours ----------------------------------------------------------------------------------------

DAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
FRENCH_DAYS = ("lundi", "mardi", "mercredi", "jeudi", "vendredi", "samedi", "dimanche")
SHORT_DAY_NAMES = {"mon": 0, "tue": 1, "tues": 1, "wed": 2, "thu": 3, "thur": 3, "thurs": 3, "fri": 4, "sat": 5,
                   "sun": 6}
SHORT_DAY = r"(?:Mon|Tues?|Wed|Thu(?:rs?)?|Fri|Sat|Sun)"
ANY_DAY = rf"(?:{'|'.join(DAYS)}|{SHORT_DAY}\.?)"
# Opening hours: the model read "Mon–Fri" as "Mono-Fri", lost a day of "Monday–Friday" ("Lundi, 9 h 17 h") and
# took "closed Sun." for the sun; "Monday to Friday" it translates. So a range of days or of times goes to the
# model with "to" for its dash, and abbreviated days written out where the line is a schedule (a range of days,
# or a day before a date or a time: "Sat 10am", "Tue., March 4"); "Sat", "Sun", "Wed" elsewhere are words.
DAY_RANGE = re.compile(rf"(?<![\w.])({ANY_DAY})(\s?[-\u2013\u2014]\s?|\s(?:to|through|thru|until)\s)({ANY_DAY})(?!\w)")
DAY_BEFORE_DATE = re.compile(rf"(?<![\w.]){SHORT_DAY}\.?,?\s(?:\d|(?:{ENGLISH_MONTHS})\b)")
SHORT_DAY_WORD = re.compile(rf"(?<![\w.])({SHORT_DAY})(\.?)(?!\w)(?=(\s*$|\s+(?!(?:{ENGLISH_MONTHS}|{ANY_DAY})\b)[A-Z]"
                            r")?)")
HOUR = r"\d{1,2}(?:[:.][0-5]\d)?\s?[ap]\.?\s?m\.?|\d{1,2}:[0-5]\d"
HOUR_RANGE = re.compile(rf"(?<![\w:.])(from\s+|between\s+|at\s+)?({HOUR})\s?[-\u2013\u2014]\s?({HOUR})(?![\w:])",
                        re.IGNORECASE)


def english_days_and_hours(english: str) -> str:
    """`english` with its ranges of days and hours written with "to" ("Mon–Fri, 9 am–5 pm" -> "Monday to Friday,
    from 9 am to 5 pm") and, in a schedule, its abbreviated days written out; a period that also ends the
    sentence stays ("closed Sun." -> "closed Sunday.")."""
    if DAY_RANGE.search(english) or DAY_BEFORE_DATE.search(english):
        english = SHORT_DAY_WORD.sub(lambda match: DAYS[SHORT_DAY_NAMES[match.group(1).lower()]]
                                     + ("." if match.group(2) and match.group(3) is not None else ""), english)
    english = DAY_RANGE.sub(lambda match: f"{match.group(1)} to {match.group(3)}"
                            if match.group(2).strip() in "-\u2013\u2014" else match.group(), english)

    def hours(match: re.Match) -> str:
        first, last = match.group(2), match.group(3)
        if any(int(re.match(r"\d+", hour).group()) > 23 for hour in (first, last)):
            return match.group()
        if match.group(1) and match.group(1).lower().startswith("between"):
            return f"{match.group(1)}{first} and {last}"
        opening = match.group(1) if match.group(1) and match.group(1).lower().startswith("from") else "from "
        return f"{opening}{first} to {last}"

    return HOUR_RANGE.sub(hours, english)


# Short forms the model copied or misread, written out for it: "10 hrs" and "20 mins" (copied), "500 m" (read as
# millions: "après 500 millions"; not after a currency nor before what millions count: "$5 m", "5 m people"),
# "e.g." (lost), "approx." ("approximative. 300 euros"), "vs." ("La France vs. L'Allemagne")
DURATION_ABBREVIATION = re.compile(r"(?<=\d)(\s?)(hrs?|mins|secs)\.?(?=[\s,;:!?)]|\.?$|\.\s)", re.IGNORECASE)
DURATION_WORDS = {"hr": "hour", "hrs": "hour", "mins": "minute", "secs": "second"}
METERS = re.compile(r"(?<![$€£¥\w.,])(\d+(?:[.,]\d+)?) m(?=[\s,;:!?)]|\.?$|\.\s)(?!\s+(?:people|users|customers|"
                    r"viewers|visitors|subscribers|barrels|tonnes|tons|jobs|homes|households|votes|shares|dollars|"
                    r"euros|pounds|years|copies|units|downloads)\b)")
SHORT_WORDS = {"e.g.": "for example", "approx.": "approximately", "vs.": "against"}
SHORT_WORD = re.compile(r"(?<![\w.])(e\.g\.|approx\.|vs\.)(?=\s)", re.IGNORECASE)


def english_short_forms(english: str) -> str:
    """`english` with the short forms of hours, minutes, seconds and meters after a number, and "e.g.",
    "approx." and "vs.", written out ("10 hrs" -> "10 hours", "500 m" -> "500 meters"); a period that ends the
    sentence stays."""

    def duration(match: re.Match) -> str:
        word = DURATION_WORDS[match.group(2).lower()]
        number = re.search(r"[\d.,:]+$", english[:match.start()]).group()
        if re.search(r"[.:]\d\d$|^\d{4}$", number):  # a time of day: "(20.45 hrs)", "1400 hrs"
            return match.group()
        ends = match.group().endswith(".") and re.match(r"\s*$|\s+[A-Z]", english[match.end():]) is not None
        return " " + word + ("" if number in ("1", "1.0") else "s") + ("." if ends else "")

    english = DURATION_ABBREVIATION.sub(duration, english)
    english = METERS.sub(lambda match: match.group(1) + (" meter" if match.group(1) == "1" else " meters"), english)
    return SHORT_WORD.sub(lambda match: SHORT_WORDS[match.group(1).lower()], english)


# A number: "No. 5" ("no. 5" in the model's French), which French writes "n° 5"
NUMBER_SIGN = re.compile(r"(?<![\w.])No\.\s?(?=\d)")
FRENCH_NUMBER_SIGN = re.compile(r"(?<![\w.])([Nn])(?:o\.?|°|º)\s?(?=\d)")
# A century in digits ("the 21st century" -> "le 21e siècle"), which French writes in Roman numerals: "XXIe siècle"
CENTURY = re.compile(r"(?<![\w.])(\d{1,2})(?:st|nd|rd|th)[\s-]+century\b", re.IGNORECASE)
FRENCH_CENTURY = re.compile(r"(?<![\w.])(?:(\d{1,2})(?:e|er|ème)\s+siècle(?!\w)|siècle\s+(\d{1,2})(?:e|er|ème)(?!\w))")
ROMAN = ((10, "X"), (9, "IX"), (5, "V"), (4, "IV"), (1, "I"))


def roman(number: int) -> str:
    digits = []
    for value, letters in ROMAN:
        while number >= value:
            digits.append(letters)
            number -= value
    return "".join(digits)


ROMAN_CENTURY = re.compile(r"(?<![\w.])([IVX]+)(?:e|er) siècle")


def digit_centuries(text: str) -> str:
    """`text` with its centuries in Roman numerals in digits again ("XXIe siècle" -> "21e siècle"): what the
    checks of kept numbers and ordinals read."""
    values = {letters: value for value, letters in ROMAN}

    def digits(match: re.Match) -> str:
        letters, number = match.group(1), 0
        while letters:
            two = letters[:2] if letters[:2] in values else letters[:1]
            number, letters = number + values[two], letters[len(two):]
        return f"{number}{'er' if number == 1 else 'e'} siècle"

    return ROMAN_CENTURY.sub(digits, text)


def french_numbering(english: str, translation: str) -> str:
    """`translation` with the numbers and centuries of `english` as French writes them: "n° 5", "XXIe siècle"."""
    if NUMBER_SIGN.search(english):
        translation = FRENCH_NUMBER_SIGN.sub(lambda match: match.group(1) + "°" + NBSP, translation)
    centuries = {int(match.group(1)) for match in CENTURY.finditer(english)}

    def century(match: re.Match) -> str:
        number = int(match.group(1) or match.group(2))
        if number not in centuries or not 1 <= number <= 30:
            return match.group()
        return f"{roman(number)}{'er' if number == 1 else 'e'} siècle"

    return FRENCH_CENTURY.sub(century, translation) if centuries else translation


# A quarter of the year, as business English abbreviates it ("Q3 2024", "in Q3", "Q2 earnings"), not a question's
# number ("Q1: How do I ...?") nor a car (the Audi Q3): French writes T3 (trimestre). Where one is sure, the others
# of the sentence are too ("Q2 and Q3 2024").
QUARTER = re.compile(r"(?P<before>(?i:\b(?:in|for|during|of|from|since|through|until|each|every|per|between|before|"
                     r"after|over|ending|ended))\s+|(?<![\w.,])(?:19|20)\d{2}\s+)?(?<![\w.-])Q(?P<number>[1-4])"
                     r"(?![\w-]|[:.)]\s)(?=(?P<after>[\s/-]?(?:'\d{2}|(?:19|20)\d{2})(?!\w)|\s+(?:results?|earnings|"
                     r"sales|revenues?|profits?|loss(?:es)?|growth|figures|numbers|reports?|GDP|deliveries|shipments)\b))?")
FRENCH_QUARTER = re.compile(r"(?:\b([Ee]n|[Ll]a)\s+)?(?<![\w.-])Q([1-4])(?![\w-])")


def french_quarters(english: str, translation: str) -> str:
    """`translation` with the quarters of `english` as French writes them: "Q3 2024" -> "T3 2024", "en Q3" -> "au
    T3"; a Q of the source that is no quarter ("Q1: How ...?") stays."""
    found = list(QUARTER.finditer(english))
    if not any(match.group("before") or match.group("after") for match in found):
        return translation
    quarters = {match.group("number") for match in found}

    def quarter(match: re.Match) -> str:
        if match.group(2) not in quarters:
            return match.group()
        article = {"en": "au ", "En": "Au ", "la": "le ", "La": "Le "}.get(match.group(1) or "", "")
        return f"{article}T{match.group(2)}"

    return FRENCH_QUARTER.sub(quarter, translation)


FRENCH_DAY = "|".join(FRENCH_DAYS)
FRENCH_DAY_RANGE = re.compile(rf"(?<![\w'’])(?:(du|de|le)\s)?({FRENCH_DAY})\s(?:à|au|jusqu['’]au)\s(?:le\s)?"
                              rf"({FRENCH_DAY})(?!\w)", re.IGNORECASE)
FRENCH_HOUR = r"\d{1,2}[ \u00a0\u202f]h(?:[ \u00a0\u202f]\d{2})?"
FRENCH_HOUR_RANGE = re.compile(rf"(?<![\w'’])(?:(de|à|dès)\s)?({FRENCH_HOUR})\s?(?:à|-|\u2013)\s?({FRENCH_HOUR})"
                               r"(?![\w])", re.IGNORECASE)
ENGLISH_HOUR_RANGE = re.compile(rf"(?<![\w:.])(?:{HOUR})(?:\s?[-\u2013\u2014]\s?|\s(?:to|and)\s)(?:{HOUR})(?![\w:])",
                                re.IGNORECASE)


def french_days_and_hours(english: str, translation: str) -> str:
    """`translation` with the ranges of days and hours of `english` as French writes a schedule: "lundi à
    vendredi" -> "du lundi au vendredi", "9 h à 17 h" -> "de 9 h à 17 h"."""
    if DAY_RANGE.search(english):

        def days(match: re.Match) -> str:
            capital = match.start() == 0 and match.group()[0].isupper()
            written = f"du {match.group(2).lower()} au {match.group(3).lower()}"
            return written[0].upper() + written[1:] if capital else written

        translation = FRENCH_DAY_RANGE.sub(days, translation)
    if ENGLISH_HOUR_RANGE.search(english):

        def hours(match: re.Match) -> str:
            capital = match.start() == 0 and match.group()[0].isupper()
            written = f"de {match.group(2)} à {match.group(3)}"
            return written[0].upper() + written[1:] if capital else written

        translation = FRENCH_HOUR_RANGE.sub(hours, translation)
    return translation


# "on Sunday" in a sentence about what happened or will happen is one Sunday, which French writes "dimanche"; the
# model wrote "le dimanche", which French reads as every Sunday ("les six jeunes ont été arrêtés le dimanche à
# Marzahn"). Not "on Sundays" nor "every Sunday", nor in the present ("The museum is closed on Monday": "le
# lundi" is right there), nor before a date ("le dimanche 5 mars"), nor where a word after it says which ("le
# samedi suivant")
ON_ONE_DAY = re.compile(rf"(?<!every )\b[Oo]n ({'|'.join(DAYS)})\b(?!s\b)")
STATE = re.compile(r"\b(?:is|are|be|been|being|'s|'re)\s+\w+ed\b", re.IGNORECASE)  # "is closed": no event
EVENT = re.compile(r"\b(?:\w+ed|was|were|had|did|said|told|went|came|left|met|made|took|gave|found|saw|won|lost|"
                   r"began|held|fell|rose|hit|shot|ran|struck|sold|bought|spoke|wrote|broke|will|would|shall)\b|'ll\b",
                   re.IGNORECASE)
WHICH_DAY = r"(?:suivant|précédent|passé|dernier|prochain|d['’]après|d['’]avant|noir|saint|où|de\s)"


def french_one_day(english: str, translation: str) -> str:
    """`translation` with "le dimanche" as "dimanche" where `english` has "on Sunday" (ON_ONE_DAY) and tells of
    an event."""
    if not EVENT.search(STATE.sub(" ", english)):
        return translation
    for day in {match.group(1) for match in ON_ONE_DAY.finditer(english)}:
        jour = FRENCH_DAYS[DAYS.index(day)]
        translation = re.sub(rf"(?<!\bsur )(?<!\bpar )\b(?:(l)|L)e ({jour})\b(?!\s*\d)(?!\s+{WHICH_DAY})",
                             lambda match: match.group(2) if match.group(1) else match.group(2).capitalize(),
                             translation)
    return translation


def day_first_dates(english: str) -> str:
    """`english` with its dates in digits written month first for sure written day first, as French reads them
    (the model copies them): "12/25/2024" -> "25/12/2024"."""
    return DIGIT_DATE.sub(lambda match: f"{match.group(2)}/{match.group(1)}/{match.group(3)}"
                          if 1 <= int(match.group(1)) <= 12 < int(match.group(2)) <= 31 else match.group(), english)


def render_dates(source: str, translation: str) -> str:
    """Each date of `source` written "3 mars 2025" in `translation`, wherever the model put its day, month and
    year next to one another, in whatever order ("le 3 2025 mars", "mars 3, 2025")."""
    separator = r"(?:\s*,\s*|\s+(?:de\s+|d['’]\s?)?)"
    for date in source_dates(source):
        day = rf"0?{date.day}(?:er|e|ème|st|nd|rd|th)?"
        short = "Sept?" if date.month == 8 else MONTHS[date.month][:3]
        month = rf"(?:{FRENCH_MONTHS[date.month]}|{MONTHS[date.month]}|{short}\.?)"
        parts = [day, month] + ([date.year] if date.year else [])
        orders = ((0, 1, 2), (1, 0, 2), (0, 2, 1), (2, 0, 1), (1, 2, 0), (2, 1, 0)) if date.year else ((0, 1), (1, 0))
        for order in orders:
            pattern = re.compile(r"(?<![\w])" + separator.join(parts[i] for i in order) + r"(?![\w])", re.IGNORECASE)
            translation, count = pattern.subn(date.french, translation, count=1)
            if count:
                break
        # the month the model also wrote before the date: "délai de décembre 1er décembre 2013"
        translation = re.sub(rf"(?<!\w){FRENCH_MONTHS[date.month]}\s+(?={re.escape(date.french)})", "", translation)
    return translation


# "à" and "de" before a date, as French contracts them with the date's article: "jusqu'à 31 décembre" -> "jusqu'au
# 31 décembre", "de 5 janvier au 31" -> "du 5 janvier au 31"; English's "on" word for word: "sur 22 septembre" -> "le
# 22 septembre", "sur 25/12/2024" -> "le 25/12/2024", "sur 2024-03-15" -> "le 2024-03-15"
BEFORE_DATE = re.compile(r"(?<![\w-])(à|À|de|De|sur(?: le)?|Sur(?: le)?)\s+(?=(?:1er|\d{1,2})\s+(?:"
                         + "|".join(FRENCH_MONTHS) + r")\b|\d{1,2}/\d{1,2}/\d{2,4}(?![\d/])"
                         r"|\d{4}-\d{2}-\d{2}(?![\d-]))")
WITH_ARTICLE = {"à": "au ", "À": "Au ", "de": "du ", "De": "Du ", "sur": "le ", "Sur": "Le ", "sur le": "le ",
                "Sur le": "Le "}


def dates_with_article(text: str) -> str:
    return BEFORE_DATE.sub(lambda match: WITH_ARTICLE[match.group(1)], text)


# ---- elisions and contractions ------------------------------------------------------------------------------

VOWEL_WORD = r"(?=[aeiouyàâäéèêëîïôöùûüœAEIOUYÀÂÉÈÊÎÔÛŒ])(?!(?:un|une|onze|oui|ouate|yeux|y|yaourt|et|ou)\b)"
# not a pronoun after its verb's hyphen ("Utilisez-le avec"), which never elides
ELISION = re.compile(rf"(?<![-\w])(le|la|je|me|te|se|ne|de|que|jusque|lorsque|puisque)\s+{VOWEL_WORD}", re.IGNORECASE)
ELIDED = {"le": "l", "la": "l", "je": "j", "me": "m", "te": "t", "se": "s", "ne": "n", "de": "d", "que": "qu",
          "jusque": "jusqu", "lorsque": "lorsqu", "puisque": "puisqu"}
# "de un" and "que un" elide ("d'un"); "le un" (the number one), "la une" (the front page) and any word before
# "et" or "ou" do not
ELIDES_BEFORE_UN = re.compile(r"\b(de|que|jusque|lorsque|puisque)\s+(?=une?\b)", re.IGNORECASE)
SI_IL = re.compile(r"\b(si)\s+(?=ils?\b)", re.IGNORECASE)
CE_EST = re.compile(r"\b(ce)\s+(?=(?:est|était|étaient|a|aurait|eût)\b)", re.IGNORECASE)
# de le -> du, à le -> au, de les -> des, à les -> aux, before a noun: not before an infinitive, where "le" is a
# pronoun ("de le faire", "à les voir"), nor "le" before a vowel or h, where it elides ("à l'hôpital")
CONTRACTION = re.compile(r"\b(de|à|À|De)\s+(le|les)\s+(?=([^\W\d_][\w'’-]*))")
VOWEL_OR_H = re.compile(r"[aeiouyhàâäéèêëîïôöùûüœ]", re.IGNORECASE)
INFINITIVE = re.compile(r"(?:er|ir|re|oir)$")
CONTRACTED = {("de", "le"): "du", ("de", "les"): "des", ("à", "le"): "au", ("à", "les"): "aux"}


def repair_elisions(text: str, apostrophe: str = "'") -> str:
    """`text` with the elisions and contractions French requires that the model left out."""

    def elide(match: re.Match) -> str:
        word = match.group(1)
        short = ELIDED[word.lower()]
        return (short.capitalize() if word[0].isupper() else short) + apostrophe

    def contract(match: re.Match) -> str:
        preposition, article, following = match.group(1), match.group(2), match.group(3)
        if (INFINITIVE.search(following.lower()) and not following[0].isupper()) or (
                article == "le" and VOWEL_OR_H.match(following)):
            return match.group()
        word = CONTRACTED[(preposition.lower(), article)]
        return (word.capitalize() if preposition[0].isupper() else word) + " "

    text = ELISION.sub(elide, text)
    text = ELIDES_BEFORE_UN.sub(elide, text)
    text = SI_IL.sub(lambda m: ("S" if m.group(1)[0] == "S" else "s") + apostrophe, text)
    text = CE_EST.sub(lambda m: ("C" if m.group(1)[0] == "C" else "c") + apostrophe, text)
    return CONTRACTION.sub(contract, text)


# ---- titles ---------------------------------------------------------------------------------------------

# English titles before a name without the period the sentence splitter took for a sentence's end ("Mr. Brown and
# Mrs. Green met Ms." / "White."), "Ms." as "Mrs." (both "Mme" in French) and the rarer ones written out, as the
# model knows them ("Gen." -> "General"); a doctor's and a professor's go behind a placeholder that comes back in
# French (nmt.text.protect.TITLED_PERSON)
TITLES = {"Ms": "Mrs", "Mr": "Mr", "Mrs": "Mrs", "Gen": "General", "Gov": "Governor", "Sen": "Senator",
          "Rep": "Representative", "Capt": "Captain", "Lt": "Lieutenant", "Col": "Colonel", "Sgt": "Sergeant",
          "Rev": "Reverend", "Pres": "President"}
TITLE = re.compile(r"(?<![\w.])(?:(Ms|Mr|Mrs)\.?|(Gen|Gov|Sen|Rep|Capt|Lt|Col|Sgt|Rev|Pres)\.)(?= [A-Z])")


def english_titles(text: str, couples: bool = True) -> str:
    """`text` with the titles before names as TITLES writes them: "Ms. White" -> "Mrs White"; with `couples`,
    each couple written out as two people (nmt.text.names.couples_written_out)."""
    return TITLE.sub(lambda match: TITLES[match.group(1) or match.group(2)],
                     couples_written_out(text) if couples else text)


# Country and union abbreviations with periods, as the model knows them: "U.K." came out "l'ONU" and "U.N."
# "les États-Unis", where "UK" and "UN" come out right. A period that also ends the sentence stays: before the end
# of the text, or before a word that opens sentences ("in the U.K. She ..."); before another capitalized word
# ("the U.K. Parliament") it is the abbreviation's.
DOTTED_ABBREVIATION = re.compile(rf"(?<![\w.])(U\.S\.A|U\.K|U\.S|U\.N|E\.U)\.(?=(\s*$|\s+(?:{SENTENCE_OPENERS})\b)?)")


def english_abbreviations(text: str) -> str:
    """`text` with U.K., U.S., U.S.A., U.N. and E.U. written without periods (a sentence's own period kept)."""
    return DOTTED_ABBREVIATION.sub(lambda match: match.group(1).replace(".", "") + ("." if match.group(2) is not None
                                                                                    else ""), text)


# A couple the model wrote as two people ("M. Brown et Mme Brown", "à M. Martin et à Mme Martin"), as French writes
# it: "M. et Mme Brown", "à M. et Mme Martin"
FRENCH_COUPLE = re.compile(rf"\bM\. ({NAME_WORDS}) et (?:(à|de) )?Mme \1(?![\w'’-])")


def french_couples(text: str) -> str:
    return FRENCH_COUPLE.sub(lambda match: f"M. et Mme {match.group(1)}", text)


# ---- punctuation --------------------------------------------------------------------------------------------

QUOTED = re.compile(r"[\"“]\s*([^\"“”]+?)\s*[\"”]")
HIGH_MARK = re.compile(r"[ \u00a0\u202f]*([;!?]+|:)(?=[\s\"”»)\]]|$)")
OPENING_GUILLEMET = re.compile(r"«[ \u00a0\u202f]*")
CLOSING_GUILLEMET = re.compile(r"[ \u00a0\u202f]*»")
WORD_APOSTROPHE = re.compile(r"(?<=[^\W\d_])['’](?=[^\W\d_])")


def punctuate(text: str, typography: Typography, keep: tuple[str, ...] = ()) -> str:
    """`text` with French quotes and spaces, its apostrophes as the setting says; `keep`: strings left as they
    are (links, addresses and codes the translation carries over)."""
    if not typography.active or not text:
        return text
    return on_prose(text, lambda prose: _french_marks(prose, typography), keep)


def prose_pieces(text: str, keep: tuple[str, ...] = (), links_only: bool = False) -> list[tuple[str, bool]]:
    """`text` in pieces, each with whether it is prose: what protect keeps as written (links, addresses, code;
    `links_only`: links, addresses, backticked code and paths, not the identifiers and codes that may be a word
    such as "iPhone" or a glued "est1,299") and the strings of `keep` are not."""
    spans = ([match.span() for pattern in (URL, EMAIL, BACKTICKED, PATH) for match in pattern.finditer(text)]
             if links_only else verbatim_spans(text, numbers=False))
    spans += [match.span() for kept in keep if kept for match in re.finditer(re.escape(kept), text)]
    pieces, last = [], 0
    for start, end in sorted(spans):
        if start < last:
            continue
        pieces.append((text[last:start], True))
        pieces.append((text[start:end], False))
        last = end
    pieces.append((text[last:], True))
    return pieces


def on_prose(text: str, change: Callable[[str], str], keep: tuple[str, ...] = (), links_only: bool = False) -> str:
    """`text` with `change` made to its prose alone (prose_pieces), the rest left byte for byte. `change` sees
    the prose's pieces joined by NUL, which it must leave in place."""
    pieces = prose_pieces(text, keep, links_only)
    prose = change("\0".join(piece for piece, free in pieces if free))
    free_parts = iter(prose.split("\0"))
    return "".join(next(free_parts) if free else piece for piece, free in pieces)


def prose_only(text: str) -> str:
    """`text` with its links, addresses, backticked code and paths taken out (prose_pieces), a NUL in each place."""
    return "\0".join(piece for piece, free in prose_pieces(text, links_only=True) if free)


def _french_marks(text: str, typography: Typography) -> str:
    text = re.sub(r"([:;!?])«", r"\1 «", text)
    if text.count('"') % 2 == 0 or "“" in text:
        text = QUOTED.sub(lambda m: f"«{NBSP}{m.group(1)}{NBSP}»", text)
    text = OPENING_GUILLEMET.sub("«" + NBSP, text)
    text = CLOSING_GUILLEMET.sub(NBSP + "»", text)

    def space(match: re.Match) -> str:
        marks = match.group(1)
        start = match.start()
        if start == 0 or text[start - 1] in "\n":
            return marks
        return (NBSP if marks == ":" else typography.before_high_marks) + marks

    text = HIGH_MARK.sub(space, text)
    if typography.apostrophe == "keep":
        return text
    return WORD_APOSTROPHE.sub(typography.elided, text)


def render_sentence(source: str, translation: str, typography: Typography) -> str:
    """The translation of one sentence (or clause) of `source` with its numbers, amounts, dates and elisions
    written as French does (punctuation is the whole line's: `punctuate`); links, addresses, backticked code and
    paths left as they are, in the translation and in the source ("https://x.org/1.0/" came out ".../1,0/")."""
    if not typography.active or not translation:
        return translation
    english = prose_only(source)

    def render(prose: str) -> str:
        prose = render_numbers(english, prose, typography)
        prose = french_ordinals(french_scales(french_bytes(french_counts(english, prose))))
        prose = dates_with_article(render_dates(english, prose))
        prose = french_numbering(english, french_one_day(english, french_days_and_hours(english, prose)))
        prose = french_quarters(english, prose)
        prose = repair_elisions(prose, typography.elided)
        if "\u2026" in english and "..." not in english:  # the source's one character: "Loading…" -> "Chargement…"
            prose = prose.replace("...", "\u2026")
        return french_couples(prose)

    translation = on_prose(translation, render, links_only=True)
    first = next((char for char in source if char.isalpha()), "")
    if first.isupper() and ARTICLE_FIRST.match(translation):  # a placeholder that opened the sentence: "le Dr"
        translation = translation[0].upper() + translation[1:]
    return translation


ARTICLE_FIRST = re.compile(r"(?:le|la|les)\s|l['’]\w")
