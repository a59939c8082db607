"""XLIFF files translated for a localiser: `nmt translate -i app.xlf -o app.fr.xlf`, version 1.2 or 2.x.

    french = translate_xliff(data, translate, CatalogOptions())   # bytes in, bytes out

Each unit's source is kept and its target filled where it has none (or, with `overwrite`, where it has one): 1.2's
<trans-unit> with state="needs-review-translation" (or "translated" without `fuzzy`), 2.x's <segment> with
state="translated" and subState="nmt:machine" (2.x has no state for a translation to review; "initial" would say
it has none). A unit marked translate="no" is left alone. Inline elements come back where the model puts their
placeholder: a code element whole (1.2's <ph>, <bpt>, <ept>, <it>, <x/>, <bx/>, <ex/>; 2.x's <ph/>, <sc/>,
<ec/>), the tags of an element around text apart, its text translated (1.2's <g>, <mrk>; 2.x's <pc>, <mrk>); so
does a format in the text (printf's, Apple's "%@", brace fields), as in a gettext catalog. A source of more than
MAX_PLACEHOLDERS codes and formats is left untranslated (a warning counts them), never given its English back.
The file says target-language="fr" (1.2) or trgLang="fr" (2.x); everything else is written back as it was read.
A file that declares a document type or entities is refused (an entity bomb needs them).
"""

from __future__ import annotations

import html
import logging
import re
from collections.abc import Callable

from nmt.apps.catalogs import (
    COUNT,
    FORMAT,
    CatalogOptions,
    alone,
    counted_translations,
    has_words,
    stand_ins,
    with_numbers,
)
from nmt.errors import FileRefused
from nmt.text.protect import MAX_PLACEHOLDERS, PLACEHOLDER, Protected

log = logging.getLogger("nmt")

NS_12 = "urn:oasis:names:tc:xliff:document:1.2"
NS_2 = "urn:oasis:names:tc:xliff:document:2.0"
# an inline code element whole (its content is the program's, not text), else any tag alone
CODE_ELEMENT = re.compile(r"<(ph|bpt|ept|it|sub)\b[^<>]*?(?:/>|>.*?</\1\s*>)|<[^<>]+>", re.DOTALL)


def translate_xliff(data: bytes, translate: Callable[[list[str]], list[str]],
                    options: CatalogOptions = CatalogOptions()) -> bytes:
    """An XLIFF file's units translated into French (see the module docstring)."""
    from lxml import etree

    if b"<!DOCTYPE" in data[:65536] or b"<!ENTITY" in data[:65536]:
        raise FileRefused("cannot read the XLIFF file: it declares a document type or entities (an entity bomb?)")
    parser = etree.XMLParser(resolve_entities=False, no_network=True, huge_tree=False, remove_blank_text=False)
    try:
        root = etree.fromstring(data, parser)
    except etree.XMLSyntaxError as exc:
        raise FileRefused(f"cannot read the XLIFF file: {exc}") from None
    namespace = etree.QName(root).namespace
    if etree.QName(root).localname != "xliff" or namespace not in (NS_12, NS_2):
        raise FileRefused("not an XLIFF 1.2 or 2.x file: its root is not <xliff> in an XLIFF namespace")
    q = lambda name: f"{{{namespace}}}{name}"  # noqa: E731
    if namespace == NS_12:
        for file in root.iter(q("file")):
            file.set("target-language", "fr")
        pairs = [(unit, unit.find(q("source")), unit.find(q("target"))) for unit in root.iter(q("trans-unit"))
                 if unit.get("translate") != "no"]
    else:
        root.set("trgLang", "fr")
        pairs = [(segment, segment.find(q("source")), segment.find(q("target")))
                 for unit in root.iter(q("unit")) if unit.get("translate") != "no"
                 for segment in unit.iter(q("segment"))]
    todo = [(holder, source, target) for holder, source, target in pairs if source is not None
            and (options.overwrite or target is None or not "".join(target.itertext()).strip())]
    messages = [Inline.of(_inner(source, namespace)) for _, source, _ in todo]
    found = iter(counted_translations(messages, translate))
    left = 0
    for (holder, source, target), message in zip(todo, messages, strict=True):
        content = message.restored([next(found) for _ in message.pieces()])
        if message.whole is not None:  # too many codes to place: untranslated, never its English as French
            left += 1
            continue
        if target is None:  # after its source, indented as it is
            target = etree.Element(q("target"))
            before = source.getprevious().tail if source.getprevious() is not None else source.getparent().text
            source.addnext(target)
            target.tail, source.tail = source.tail, before if before and not before.strip() else source.tail
        _fill(target, content, namespace)
        if namespace == NS_12:
            target.set("state", "needs-review-translation" if options.fuzzy else "translated")
        else:
            holder.set("state", "translated")
            if options.fuzzy:
                holder.set("subState", "nmt:machine")
            elif holder.get("subState") == "nmt:machine":
                del holder.attrib["subState"]
    if left:
        log.warning("%d of the XLIFF file's units left untranslated: more than %d inline codes and formats each, "
                    "more than the model can be given to place", left, MAX_PLACEHOLDERS)
    return etree.tostring(root.getroottree(), xml_declaration=True, encoding="UTF-8")


def _inner(element, namespace: str) -> str:
    """The XML inside `element`, without the XLIFF namespace's declarations its children would repeat."""
    from lxml import etree

    text = html.escape(element.text or "", quote=False)
    for child in element:
        text += etree.tostring(child, encoding="unicode", with_tail=True)
    return text.replace(f' xmlns="{namespace}"', "")


def _fill(target, content: str, namespace: str) -> None:
    """`target`'s content replaced by `content` (XML of text and inline elements)."""
    from lxml import etree

    parsed = etree.fromstring(f'<target xmlns="{namespace}">{content}</target>',
                              etree.XMLParser(resolve_entities=False, no_network=True))
    for child in list(target):
        target.remove(child)
    target.text = parsed.text
    for child in parsed:
        target.append(child)


class Inline:
    """A source's XML as the model is given it: its text unescaped, each inline code element, each tag and each
    format of the text (nmt.apps.catalogs.FORMAT: "%d", "%1$@", "{count}") a placeholder (MAX_PLACEHOLDERS at most:
    else the source stays whole). The model wrote "Deleted %d files" as "Supprimer % des fichiers"."""

    def __init__(self, text: str, originals: tuple[str, ...], positions: tuple[float, ...], whole: str | None,
                 counts: dict[str, int] | None = None):
        self.text, self.originals, self.positions, self.whole = text, originals, positions, whole
        self.counts = counts or {}  # the number each count goes to the model as: its placeholder (as in catalogs)

    @classmethod
    def of(cls, xml: str) -> Inline:
        text_length = max(1, len(html.unescape(CODE_ELEMENT.sub("", xml))))
        pieces: list[str] = []
        originals: list[str] = []
        positions: list[float] = []
        place = 0  # characters of text before the next piece
        free, counts = stand_ins(html.unescape(CODE_ELEMENT.sub(" ", xml))), {}

        def text(part: str) -> str:  # a printf or brace format in the text: a placeholder too ("%d", "{count}")
            plain, kept, last = html.unescape(part), [], 0
            for match in FORMAT.finditer(plain):
                originals.append(html.escape(match.group(), quote=False))
                positions.append((place + match.start()) / text_length)
                if free and alone(plain, match) and COUNT.fullmatch(match.group()):
                    counts[free.pop(0)] = len(originals)
                kept.append(plain[last:match.start()] + PLACEHOLDER.format(len(originals)))
                last = match.end()
            return "".join(kept) + plain[last:]

        last = 0
        for match in CODE_ELEMENT.finditer(xml):
            pieces.append(text(xml[last:match.start()]))
            place += len(html.unescape(xml[last:match.start()]))
            originals.append(match.group())
            positions.append(place / text_length)
            pieces.append(PLACEHOLDER.format(len(originals)))
            last = match.end()
        pieces.append(text(xml[last:]))
        if len(originals) > MAX_PLACEHOLDERS:  # too many to place: left as it is
            return cls("", (), (), whole=xml)
        return cls("".join(pieces), tuple(originals), tuple(positions), whole=None, counts=counts)

    def pieces(self, counted: bool = True) -> list[str]:
        """The text the model translates, its counts as numbers (`counted`) or as placeholders."""
        if self.whole is not None or not has_words(self.text):
            return []
        return [(with_numbers(self.text, self.counts) if counted else self.text).strip()]

    def piece_counts(self) -> list[dict[str, int]]:
        return [self.counts] if self.pieces() else []

    def restored(self, translations: list[str]) -> str:
        """The target's XML from the translation of pieces(): its text escaped, its placeholders' originals back
        (a dropped one where it stood, a repeated or invented one removed)."""
        if self.whole is not None:
            return self.whole
        translation = translations[0] if translations else self.text
        lead = self.text[:len(self.text) - len(self.text.lstrip())]
        trail = self.text[len(self.text.rstrip()):]
        restored = Protected("", self.originals, self.positions).restore(html.escape(translation, quote=False))
        return lead + restored + trail
