"""Which language a text is in: for `nmt serve`'s /detect and for requests that say `source: "auto"`.

    detect("Bonjour le monde.")        # [Guess("fr", 99.1), Guess("en", 0.3), Guess("ga", 0.1)]
    is_not_english("Bonjour le monde.")  # True: refuse to translate it as English

py3langid (a maintained langid.py, its model in the wheel: works offline) over the 45 languages below,
LibreTranslate's: narrowing the field from langid's 97 made short sentences come out right more often
("Je suis content." fr 61% against 37%; "A dog runs in the park." en 91% against 80%). A text too short to
tell ("Hello.", "OK", a number) gets no confident guess; it is then taken to be English.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

LANGUAGES = ("en", "ar", "az", "bg", "bn", "ca", "cs", "da", "de", "el", "eo", "es", "et", "fa", "fi", "fr", "ga", "gl",
             "he", "hi", "hu", "id", "it", "ja", "ko", "lt", "lv", "ms", "no", "nl", "pl", "pt", "ro", "ru", "sk", "sl",
             "sq", "sv", "th", "tl", "tr", "uk", "ur", "vi", "zh")
# a text is refused as English only when another language has at least this probability
NOT_ENGLISH_AT = 0.5


@dataclass(frozen=True)
class Guess:
    language: str
    confidence: float  # percent, as LibreTranslate gives it

    def to_dict(self) -> dict:
        return {"language": self.language, "confidence": self.confidence}


@functools.cache
def _identifier():
    try:
        from py3langid.langid import MODEL_FILE, LanguageIdentifier
    except ImportError:
        from nmt.errors import UsageError

        raise UsageError("language detection needs py3langid: pip install 'nmt-transformer[serve]'") from None
    identifier = LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)
    identifier.set_languages(list(LANGUAGES))
    return identifier


def detect(text: str, best: int = 3) -> list[Guess]:
    """The `best` likeliest languages of `text`, likeliest first."""
    ranked = _identifier().rank(text)[:best]
    return [Guess(language, round(100 * float(probability), 1)) for language, probability in ranked]


def is_not_english(text_or_guesses: str | list[Guess]) -> bool:
    """Whether a text (or what detect() guessed of it) is confidently in another language than English."""
    top = (detect(text_or_guesses) if isinstance(text_or_guesses, str) else text_or_guesses)[0]
    return top.language != "en" and top.confidence >= 100 * NOT_ENGLISH_AT
