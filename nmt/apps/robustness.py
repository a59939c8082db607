"""The robustness test sets: ordinary input with entities, capitals and long sentences, scored by category.

    report = robustness_report(load_robustness("dev"), hypotheses, plain_hypotheses)
    report["urls"].entities_exact  ->  share of the source's URLs that came out byte-identical

Each line of `robustness:dev` / `robustness:test` has a category (numbers, dates_times, prices, urls, emails,
phones, codes, emoji, names, all_caps, title_case, long). The ALL-CAPS and Title Case lines also carry their
sentence-case source ("plain"), translated as well, so that a report can compare their meaning with
case-insensitive chrF. What counts as intact:
- URLs, e-mail addresses, codes (a token with both letters and digits, a version such as 3.2.1, a
  --flag) and emoji: byte-identical in the translation;
- numbers: the same digits in the same order, however grouped ("$1,249.99" -> "1 249,99 $", "15:30" ->
  "15 h 30" and "18:00" -> "18 h" keep them; "114, 29" does not).
A translation loops when a unit of two or more characters repeats four times in a row, or one character
six times ("DONNNNNNNI", "trétrétrétré", "D D D D ").
A line passes, as the issue's held-out probe counts them, when every entity of it is intact (on a names
line, also each capitalized source word that the reference keeps as it is), it does not loop, its meaning
does not change with capitals (ALL-CAPS and Title Case lines: case-insensitive sentence chrF at most
PASS_CAPS_MARGIN below that of its sentence-case form) and a long line keeps its content (sentence chrF at
least PASS_LONG_CHRF).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from nmt.data.corpus import data_dir, load_embedded, read_lines
from nmt.text.metrics import loops
from nmt.text.protect import entities, numbers_kept

CATEGORIES = ("numbers", "dates_times", "prices", "urls", "emails", "phones", "codes", "emoji", "names",
              "all_caps", "title_case", "long")
CASED = ("all_caps", "title_case")  # lines that carry a sentence-case form

PASS_CAPS_MARGIN = 2.0
PASS_LONG_CHRF = 45.0


@dataclass
class RobustnessLine:
    category: str
    source: str
    reference: str
    plain: str | None = None  # the sentence-case source of an ALL-CAPS or Title Case line


@dataclass
class CategoryReport:
    lines: int = 0
    entities: int = 0  # entities in the sources
    intact: int = 0  # of them, intact in the translations
    loops: int = 0
    passed: int = 0  # lines that pass (see the module's docstring)
    chrf: float = 0.0
    chrf_uncased: float | None = None  # CASED categories: translations of the line as given
    chrf_uncased_plain: float | None = None  # and of its sentence-case form
    caps_kept: int | None = None  # all_caps: translations entirely in capitals
    failures: list[str] = field(default_factory=list)  # a few sources whose entities did not survive

    @property
    def entities_exact(self) -> float | None:
        return self.intact / self.entities if self.entities else None

    def to_dict(self) -> dict:
        record = {"lines": self.lines, "entities": self.entities, "intact": self.intact, "loops": self.loops,
                  "passed": self.passed, "chrf": round(self.chrf, 2)}
        if self.chrf_uncased is not None:
            record["chrf_uncased"] = round(self.chrf_uncased, 2)
            record["chrf_uncased_plain"] = round(self.chrf_uncased_plain, 2)
        if self.caps_kept is not None:
            record["caps_kept"] = self.caps_kept
        return record


def load_robustness(split: str) -> list[RobustnessLine]:
    """The lines of robustness:`split` with their categories."""
    pairs = load_embedded("robustness", split)
    tags = read_lines(data_dir() / "robustness" / f"{split}.categories.gz")
    lines = []
    for source, reference, tag in zip(pairs.source, pairs.target, tags, strict=True):
        category, _, plain = tag.partition("\t")
        lines.append(RobustnessLine(category, source, reference, plain or None))
    return lines


def intact_entities(source: str, translation: str) -> tuple[int, int]:
    """(entities in `source`, how many of them `translation` keeps): verbatim ones as substrings, numbers as
    runs of the translation's digits, in order."""
    verbatim, numbers = entities(source)
    kept = 0
    for entity in verbatim:
        if entity in translation:
            kept += 1
            translation = translation.replace(entity, " ", 1)
    return len(verbatim) + len(numbers), kept + numbers_kept(numbers, translation)


def names_kept(source: str, reference: str, translation: str) -> bool:
    """Whether `translation` holds each capitalized word of `source` that `reference` keeps unchanged (the
    names; "London" that the reference makes "Londres" is not asked for)."""
    def has(text: str, word: str) -> bool:
        return re.search(rf"(?<![\w-]){re.escape(word)}(?![\w-])", text) is not None

    words = [word for word in re.findall(r"[^\W\d_][\w'-]*", source) if word[0].isupper()]
    return all(has(translation, word) for word in words if has(reference, word))


def robustness_report(lines: list[RobustnessLine], translations: list[str],
                      plain_translations: dict[int, str]) -> dict[str, CategoryReport]:
    """Per category (and "all"), what survived. plain_translations: line index -> translation of its
    sentence-case form, for the lines that have one."""
    from sacrebleu.metrics import CHRF

    chrf = CHRF()
    groups: dict[str, list[int]] = {}
    for index, line in enumerate(lines):
        groups.setdefault(line.category, []).append(index)
    groups["all"] = list(range(len(lines)))
    reports = {}
    for category, indices in groups.items():
        report = CategoryReport(lines=len(indices))
        for index in indices:
            line, translation = lines[index], translations[index]
            count, kept = intact_entities(line.source, translation)
            report.entities += count
            report.intact += kept
            if kept < count and len(report.failures) < 3:
                report.failures.append(line.source)
            looped = loops(translation)
            report.loops += looped
            passes = kept == count and not looped
            if passes and line.category == "names":
                passes = names_kept(line.source, line.reference, translation)
            if passes and line.category in CASED:
                as_given = chrf.sentence_score(translation.lower(), [line.reference.lower()]).score
                plain = chrf.sentence_score(plain_translations[index].lower(), [line.reference.lower()]).score
                passes = as_given >= plain - PASS_CAPS_MARGIN
            if passes and line.category == "long":
                passes = chrf.sentence_score(translation, [line.reference]).score >= PASS_LONG_CHRF
            report.passed += passes
        hypotheses = [translations[i] for i in indices]
        references = [lines[i].reference for i in indices]
        report.chrf = chrf.corpus_score(hypotheses, [references]).score
        if category in CASED:
            lower = [reference.lower() for reference in references]
            report.chrf_uncased = chrf.corpus_score([h.lower() for h in hypotheses], [lower]).score
            plain = [plain_translations[i].lower() for i in indices]
            report.chrf_uncased_plain = chrf.corpus_score(plain, [lower]).score
        if category == "all_caps":
            report.caps_kept = sum(h == h.upper() for h in hypotheses)
        reports[category] = report
    return reports


def format_report(reports: dict[str, CategoryReport]) -> list[str]:
    """The report as a table of text lines."""
    rows = [f"{'category':<12} {'lines':>5} {'entities intact':>16} {'loops':>5} {'pass':>5} {'chrF':>6}  "
            "case-insensitive chrF: as given / sentence case"]
    for category, report in reports.items():
        exact = report.entities_exact
        entities = f"{report.intact}/{report.entities} {100 * exact:5.1f}%" if exact is not None else "-"
        row = (f"{category:<12} {report.lines:>5} {entities:>16} {report.loops:>5} {report.passed:>5} "
               f"{report.chrf:6.2f}")
        if report.chrf_uncased is not None:
            row += f"  {report.chrf_uncased:.2f} / {report.chrf_uncased_plain:.2f}"
        if report.caps_kept is not None:
            row += f"; all caps kept in {report.caps_kept}/{report.lines}"
        rows.append(row)
    return rows
