"""HTML translated in place: the text of each block, a sentence at a time, with everything else kept.

    french = translate_html(page, translate, align)   # translate: texts -> translations; align: word pairs

Python's own HTML parser (html.parser, which accepts what browsers accept) reads the page into events
whose source text is kept, so what is not translated is written back byte for byte: tags with their
attributes and quoting, comments, doctypes, entities, whitespace. The text between two block boundaries
(a paragraph, a list item, a heading, a table cell; a <br> or an <img>) is translated as one line, inline
markup taken out: <b>, <a href=...>, <em> and the other inline elements are put back around the French
words aligned (nmt.decoding.alignment) with the English words they held. <script>, <style>, <pre>,
<textarea> and elements marked translate="no" or class="notranslate" are left as they are, as is any
block whose translation equals its text. Such an element inside a sentence (<code>, <kbd>, a <span
class="notranslate">) stays in it as a placeholder the model copies (nmt.text.protect), so that the
sentence is translated whole and the element comes back as it was where the placeholder lands.

The text a reader meets in attributes is translated too (TRANSLATED_ATTRIBUTES: an image's alt, a title, a
placeholder, an aria-label, a button's value, the page's description), except in what is marked translate="no"
or class="notranslate" and in <script>, <style>, <code> and the like; <html lang="en"> becomes lang="fr".
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from html.parser import HTMLParser

from nmt.text.protect import MAX_PLACEHOLDERS, PLACEHOLDER, PLACEHOLDER_PATTERN, insert_at_word_boundary

INLINE = frozenset({"a", "abbr", "b", "bdi", "bdo", "cite", "data", "dfn", "em", "font", "i", "ins", "del", "label",
                    "mark", "q", "s", "small", "span", "strong", "sub", "sup", "time", "u", "var"})
UNTRANSLATED = frozenset({"script", "style", "pre", "code", "kbd", "samp", "textarea", "svg", "math", "noscript"})
# elements kept as they are that stand inside a sentence: one placeholder in its text
IN_SENTENCE = INLINE | {"code", "kbd", "samp", "math", "svg"}
# Attributes whose text a reader sees or hears, by element ("*": any); <meta> by its name or property
TRANSLATED_ATTRIBUTES = {"*": ("title", "aria-label", "aria-description", "aria-placeholder", "aria-roledescription",
                               "aria-valuetext"),
                         "img": ("alt",), "area": ("alt",), "input": ("alt", "placeholder"),
                         "textarea": ("placeholder",)}
BUTTON_INPUTS = frozenset({"submit", "button", "reset"})  # an <input> of these types shows its value
META_DESCRIBED = frozenset({"description", "og:title", "og:description", "twitter:title", "twitter:description"})
VOID = frozenset({"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "param", "source",
                  "track", "wbr"})


@dataclass
class _Event:
    kind: str  # start, end, startend, data, entity, charref, other; kept: an element left as it is
    tag: str = ""
    attrs: list = field(default_factory=list)
    text: str = ""  # data; an entity's name or a charref's number
    start: int = 0  # offset in the page
    raw: str = ""  # the page's own text of it


class _Reader(HTMLParser):
    def __init__(self, page: str):
        super().__init__(convert_charrefs=False)
        self.events: list[_Event] = []
        starts = [0]  # where each line begins: html.parser counts lines by "\n" alone
        for line in page.split("\n"):
            starts.append(starts[-1] + len(line) + 1)
        self._line_starts = starts

    def _at(self) -> int:
        line, column = self.getpos()
        return self._line_starts[line - 1] + column

    def handle_starttag(self, tag, attrs):
        self.events.append(_Event("start", tag, attrs, start=self._at()))

    def handle_startendtag(self, tag, attrs):
        self.events.append(_Event("startend", tag, attrs, start=self._at()))

    def handle_endtag(self, tag):
        self.events.append(_Event("end", tag, start=self._at()))

    def handle_data(self, data):
        self.events.append(_Event("data", text=data, start=self._at()))

    def handle_entityref(self, name):
        self.events.append(_Event("entity", text=name, start=self._at()))

    def handle_charref(self, name):
        self.events.append(_Event("charref", text=name, start=self._at()))

    def _other(self, *args):
        self.events.append(_Event("other", start=self._at()))

    handle_comment = handle_decl = handle_pi = unknown_decl = _other


def _events(page: str) -> list[_Event]:
    reader = _Reader(page)
    reader.feed(page)
    reader.close()
    events = reader.events
    for event, following in zip(events, events[1:] + [None], strict=True):
        event.raw = page[event.start : following.start if following else len(page)]
    return events


@dataclass(frozen=True)
class Markup:
    """How a text's tags are read. HTML (the default): INLINE elements inside a sentence, any other a block
    boundary, UNTRANSLATED ones kept as they are. XML (`xml`, DeepL's tag_handling=xml, Weblate's placeholders
    <x id="1"/>): every element inside the sentence, none known. Either way the elements of `kept` (DeepL's
    ignore_tags) are kept as they are, as is what is marked translate="no" or class="notranslate"."""

    xml: bool = False
    kept: frozenset[str] = frozenset()

    def skips(self, event: _Event) -> bool:
        attrs = dict(event.attrs)
        return (event.tag in self.kept or (not self.xml and event.tag in UNTRANSLATED)
                or attrs.get("translate") == "no" or "notranslate" in (attrs.get("class") or "").split())

    def inline(self, tag: str) -> bool:
        return self.xml or tag in INLINE

    def in_sentence(self, tag: str) -> bool:
        """Whether an element kept as it is stands inside a sentence (a placeholder in its text)."""
        return self.xml or tag in IN_SENTENCE or tag in self.kept


HTML = Markup()


@dataclass
class _Block:
    """The inline events between two block boundaries, as one line of text and the inline elements' spans
    over its words."""

    events: list[_Event]
    words: list[str] = field(default_factory=list)
    spans: list[tuple[int, int, _Event, _Event | None]] = field(default_factory=list)  # first, end, start, end tag
    cut: set[int] = field(default_factory=set)  # spans that end inside a word ("<a>door</a>."): before its stop
    kept: list[str] = field(default_factory=list)  # the HTML of the elements left as they are: placeholder n+1

    def read(self) -> None:
        open_tags: list[tuple[int, _Event]] = []
        closing: list[tuple[int, int]] = []  # (span, length of the word it ended with)
        pending = ""
        for event in self.events:
            if event.kind == "kept":
                self.kept.append(event.raw)
                pending += PLACEHOLDER.format(len(self.kept))
                continue
            if event.kind in ("data", "entity", "charref"):
                pending += event.text if event.kind == "data" else html.unescape(
                    f"&{event.text};" if event.kind == "entity" else f"&#{event.text};")
                continue
            self._flush(pending)
            pending = ""
            if event.kind == "start":
                open_tags.append((len(self.words), event))
            elif event.kind == "end" and open_tags and open_tags[-1][1].tag == event.tag:
                first, start = open_tags.pop()
                self.spans.append((first, len(self.words), start, event))
                closing.append((len(self.spans) - 1, len(self.words[-1]) if self.words else 0))
        self._flush(pending)
        for span, length in closing:  # the word the span ended with grew after it: punctuation glued on
            end = self.spans[span][1]
            if end and len(self.words[end - 1]) > length:
                self.cut.add(span)
        for first, start in open_tags:  # an inline element left open in this block
            self.spans.append((first, len(self.words), start, None))

    def _flush(self, text: str) -> None:
        # a word cut by a tag (<b>Pa</b>ris) counts once, with the tag around it
        glued = bool(self.words) and bool(text) and not text[0].isspace() and self._glue
        pieces = text.split()
        if glued and pieces:
            self.words[-1] += pieces.pop(0)
        self.words.extend(pieces)
        self._glue = bool(text) and not text[-1].isspace()

    _glue = False

    @property
    def text(self) -> str:
        return " ".join(self.words)

    @property
    def has_words(self) -> bool:
        """Whether there is text to translate: not only kept elements."""
        return any(PLACEHOLDER_PATTERN.sub("", word).strip() for word in self.words)


EMPTY = "\x00empty"  # the tag of a kept element with no content


def _pair_markers(events: list[_Event]) -> None:
    """XML's empty elements that stand for the tags around words (Weblate sends "Click <strong>all</strong>" as
    `Click <x id="6"></x>all<x id="14"></x>`): one glued to the word after it opens, one glued to the word before
    it closes the last opened; each such pair becomes an inline element around those words, put back around their
    French as <b> is, instead of two placeholders glued to an English word the model then copies. Others stay
    placeholders where they stand."""

    def glued(event: _Event | None, end: bool) -> bool:
        if event is None or event.kind not in ("data", "entity", "charref"):
            return False
        return event.kind != "data" or bool((event.text[-1:] if end else event.text[:1]).strip())

    opened: list[int] = []
    for index, event in enumerate(events):
        if event.kind != "kept" or event.tag != EMPTY:
            continue
        before = events[index - 1] if index else None
        after = events[index + 1] if index + 1 < len(events) else None
        if glued(before, end=True) and opened:
            start = opened.pop()
            name = f"\x00marker{start}"
            events[start] = _Event("start", name, raw=events[start].raw)
            events[index] = _Event("end", name, raw=event.raw)
        elif glued(after, end=False) and not glued(before, end=True):
            opened.append(index)


def _apart(events: list[_Event]) -> list[list[_Event] | str]:
    """A block's events as one block, or, where it is links side by side with nothing but separators between
    them (a navigation bar: "<a>Home</a> | <a>Our menu</a> | <a>Contact us</a>"), each link a block of its own
    and the separators as they were: separate texts, never one sentence whose words move between links."""
    parts: list[list[_Event]] = []  # top-level elements and top-level text, in order
    depth = 0
    for event in events:
        if depth == 0:
            parts.append([event])
        else:
            parts[-1].append(event)
        if event.kind == "start":
            depth += 1
        elif event.kind == "end" and depth:
            depth -= 1
    links = [part[0].kind == "start" and part[0].tag == "a" for part in parts]
    separators_only = all(part[0].kind in ("data", "entity", "charref") and len(part) == 1
                          and not any(char.isalnum() for char in html.unescape(part[0].raw))
                          for part, link in zip(parts, links, strict=True) if not link)
    if sum(links) < 2 or not separators_only:
        return [list(events)]
    return [part if link else part[0].raw for part, link in zip(parts, links, strict=True)]


def translate_html(page: str, translate: Callable[[list[str]], list[str]],
                   align: Callable[[str, str], list[tuple[int, int]]], markup: Markup = HTML) -> str:
    """`page` with the text of its blocks and of the attributes a reader sees translated (`translate`: texts ->
    translations, in order; `align`: an English and a French text -> Pharaoh word pairs), and everything else
    as it was; its tags read as `markup` says."""
    events = _events(page)
    changed = not markup.xml and _translate_attributes(events, translate, markup)
    pieces: list[str | _Block] = []  # raw text, or a block to translate
    block: list[_Event] = []
    skipping: list[str] = []  # the tags of the untranslated elements we are in
    kept: list[str] | None = None  # the HTML of an untranslated element inside the block, while in it

    def close_block():
        if block:
            if markup.xml:
                _pair_markers(block)
            pieces.extend(_Block(part) if isinstance(part, list) else part for part in _apart(block))
            block.clear()

    for event in events:
        if skipping:
            if event.kind == "start" and event.tag not in VOID:
                skipping.append(event.tag)
            elif event.kind == "end" and event.tag == skipping[-1]:
                skipping.pop()
            if kept is None:
                pieces.append(event.raw)
                continue
            kept.append(event.raw)
            if not skipping:  # an element with no content (Weblate's <x id="6"></x>) may mark a tag's place
                block.append(_Event("kept", tag=EMPTY if len(kept) == 2 else "", raw="".join(kept)))
                kept = None
            continue
        empty = event.kind == "startend" or (not markup.xml and event.kind == "start" and event.tag in VOID)
        if event.kind in ("start", "startend") and (markup.skips(event) or (markup.xml and empty)):
            in_sentence = (markup.in_sentence(event.tag)
                           and sum(each.kind == "kept" for each in block) < MAX_PLACEHOLDERS)
            if in_sentence and empty:  # <x id="1"/>: one placeholder where it stands
                block.append(_Event("kept", tag=EMPTY, raw=event.raw))
                continue
            if in_sentence:
                kept = [event.raw]
                skipping.append(event.tag)
                continue
            close_block()
            if event.kind == "start" and event.tag not in VOID:
                skipping.append(event.tag)
            pieces.append(event.raw)
        elif event.kind in ("data", "entity", "charref") or (event.kind in ("start", "end")
                                                              and markup.inline(event.tag)):
            block.append(event)
        else:  # a block boundary, a void element, a comment
            close_block()
            pieces.append(event.raw)
    if kept is not None:  # an element the page never closed
        pieces.extend(kept)
    close_block()
    blocks = [piece for piece in pieces if isinstance(piece, _Block)]
    for each in blocks:
        each.read()
    todo = [each for each in blocks if each.has_words]
    translations = translate([each.text for each in todo])
    written = {id(each): _write(each, text, align) for each, text in zip(todo, translations, strict=True)}
    french = "".join(piece if isinstance(piece, str) else written.get(id(piece)) or _raw(piece) for piece in pieces)
    if changed or any(text != each.text for each, text in zip(todo, translations, strict=True)):
        french = _said_french(events, french)
    return french


def _attributes_to_translate(event: _Event) -> list[str]:
    """The names of `event`'s attributes whose text is translated."""
    attrs = {name.lower(): value for name, value in event.attrs}
    names = list(TRANSLATED_ATTRIBUTES["*"]) + list(TRANSLATED_ATTRIBUTES.get(event.tag, ()))
    if event.tag == "input" and (attrs.get("type") or "").lower() in BUTTON_INPUTS:
        names.append("value")
    if event.tag == "meta" and ((attrs.get("name") or attrs.get("property") or "").lower() in META_DESCRIBED):
        names.append("content")
    return [name for name in names if (attrs.get(name) or "").strip() and any(c.isalpha() for c in attrs[name])]


def _translate_attributes(events: list[_Event], translate: Callable[[list[str]], list[str]],
                          markup: Markup) -> bool:
    """Each start tag's raw text with its readable attributes translated (one call to `translate` for the
    page); nothing inside an element left untranslated. Whether a translation changed any."""
    todo: list[tuple[_Event, str, str]] = []  # event, attribute, English text
    skipping: list[str] = []
    for event in events:
        if event.kind not in ("start", "startend", "end"):
            continue
        if skipping:
            if event.kind == "start" and event.tag not in VOID:
                skipping.append(event.tag)
            elif event.kind == "end" and event.tag == skipping[-1]:
                skipping.pop()
            continue
        if event.kind == "end":
            continue
        if markup.skips(event):
            if event.kind == "start" and event.tag not in VOID:
                skipping.append(event.tag)
            continue
        attrs = {name.lower(): value for name, value in event.attrs}
        todo.extend((event, name, attrs[name]) for name in _attributes_to_translate(event))
    translations = translate([text.strip() for _, _, text in todo]) if todo else []
    for (event, name, text), french in zip(todo, translations, strict=True):
        if french != text.strip():
            event.raw = _with_attribute(event.raw, name, french)
    return any(french != text.strip() for (_, _, text), french in zip(todo, translations, strict=True))


def _said_french(events: list[_Event], page: str) -> str:
    """The translated `page` with its <html lang="en..."> as lang="fr"."""
    for event in events:
        if event.kind == "start" and event.tag == "html":
            lang = dict(event.attrs).get("lang") or ""
            if lang.lower().startswith("en"):
                return page.replace(event.raw, _with_attribute(event.raw, "lang", "fr"), 1)
            break
    return page


def _with_attribute(raw: str, name: str, value: str) -> str:
    """A start tag's raw text with attribute `name`'s value replaced by `value`, quoted as it was (an unquoted
    one in double quotes)."""
    pattern = re.compile(rf"(\s{re.escape(name)}\s*=\s*)(?:\"[^\"]*\"|'[^']*'|[^\s\"'=<>`]+)", re.IGNORECASE)
    match = pattern.search(raw)
    if match is None:
        return raw
    old = raw[match.end(1):match.end()]
    quote = "'" if old.startswith("'") else '"'
    escaped = html.escape(value, quote=True) if quote == '"' else html.escape(value, quote=False).replace("'", "&#x27;")
    return raw[:match.end(1)] + quote + escaped + quote + raw[match.end():]


def _raw(block: _Block) -> str:
    return "".join(event.raw for event in block.events)


def _write(block: _Block, translation: str, align: Callable[[str, str], list[tuple[int, int]]]) -> str:
    """The block's HTML with `translation` in place of its text: its leading and trailing whitespace kept,
    each inline element around the French words aligned with its English ones, each kept element where
    its placeholder is."""
    if translation == block.text:
        return _raw(block)
    translation = _with_placeholders(translation, block)
    raw = _raw(block)
    lead = re.match(r"\s*", raw).group()
    trail = re.search(r"\s*$", raw).group() if raw.strip() else ""
    words = translation.split()

    def escaped(text: str) -> str:
        return PLACEHOLDER_PATTERN.sub(lambda m: block.kept[int(m.group(1)) - 1], html.escape(text, quote=False))

    if not block.spans:
        return lead + escaped(" ".join(words)) + trail
    pairs = align(block.text, translation) if words else []
    opens: dict[int, list[str]] = {}
    closes: dict[int, list[str]] = {}
    ranges = []
    before_stop: set[int] = set()  # target words whose closing tags go before their trailing punctuation
    for number, (first, end, start_tag, end_tag) in enumerate(block.spans):
        targets = sorted({j for i, j in pairs if first <= i < end and j < len(words)})
        if targets:
            low, high = targets[0], targets[-1]
        else:  # nothing aligned: where the span stood, in proportion
            low = high = min(len(words) - 1, first * len(words) // max(1, len(block.words))) if words else 0
        ranges.append((low, high, first, end, start_tag, end_tag, number in block.cut))
    # outer elements first, so that an inner one is clipped inside its outer one and siblings do not cross
    ranges.sort(key=lambda r: (r[2], -(r[3] - r[2])))
    placed: list[tuple[int, int, int, int]] = []
    for low, high, first, end, start_tag, end_tag, cut in ranges:
        for p_low, p_high, p_first, p_end in placed:
            if p_first <= first and end <= p_end:  # inside an element placed already
                low, high = max(low, p_low), min(high, p_high)
            elif p_end <= first and low <= p_high:  # after a sibling: start after it
                low = min(p_high + 1, len(words) - 1)
            high = max(high, low)
        placed.append((low, high, first, end))
        opens.setdefault(low, []).append(start_tag.raw)
        closes.setdefault(high, []).insert(0, end_tag.raw if end_tag else f"</{start_tag.tag}>")
        if cut:
            before_stop.add(high)
    out = []
    for index, word in enumerate(words):
        stop = re.search(r"[.,;:!?…»)\]\"]+$", word) if index in before_stop else None
        body, tail = (word[: stop.start()], word[stop.start():]) if stop and stop.start() else (word, "")
        out.append("".join(opens.get(index, [])) + escaped(body) + "".join(closes.get(index, [])) + escaped(tail))
    return lead + " ".join(out) + trail


def _with_placeholders(translation: str, block: _Block) -> str:
    """`translation` holding each of the block's placeholders once: one the model dropped goes back where
    it stood in the English, in proportion; an invented or repeated one is removed."""
    seen: set[int] = set()

    def once(match: re.Match) -> str:
        number = int(match.group(1))
        if number > len(block.kept) or number in seen:
            return ""
        seen.add(number)
        return match.group()

    translation = PLACEHOLDER_PATTERN.sub(once, translation)
    for number in range(1, len(block.kept) + 1):
        if number not in seen:
            placeholder = PLACEHOLDER.format(number)
            position = block.text.index(placeholder) / max(1, len(block.text))
            translation = insert_at_word_boundary(translation, placeholder, position)
    return translation
