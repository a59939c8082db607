"""Subtitle files (SubRip, .srt) translated with their numbering, timings and layout kept.

    french = translate_srt(english_srt_text, translate, align)   # translate: lines -> translations

The file is read a block at a time (blocks are separated by blank lines): a block of a number, a timing line
and text is a cue, and only its text lines change; anything else (a block that is not number, timing, text)
is written back byte for byte, and so are the numbers and timing lines, never re-rendered. A sentence often
runs over several cues ("I think that..." / "...we should go."): consecutive cues are joined until one ends a
sentence (at most MAX_JOINED), translated together, and the translation is shared back over them in proportion to their
English length, cut at spaces, so that each cue keeps its share of the screen time. Each cue keeps its
number of lines (the translation wrapped at the spaces nearest to even lines), the formatting tags around
its whole text (<i>...</i> for off-screen voices, <font color=...>), the position tags it starts with
({\an8}) and the dash that opens each line of a dialogue ("- Coming?" / "- No.": a new speaker, so never
joined to the cue before). Tags inside a cue ("I <i>never</i> said") go around the French words aligned
with the English ones they held, as nmt.apps.webpages places them (`align`: an English text and its
French -> word pairs; without it they are left out). A cue whose translation equals its text is written
back exactly as it was, so a file with nothing to translate comes back byte for byte, with its line endings
and byte order mark. Where a joined sentence's translation has fewer words than its cues, each of its cues is
translated alone instead (a one-word cue is never left as "...").
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from nmt.errors import UsageError
from nmt.text.segment import split_sentences

Align = Callable[[str, str], list[tuple[int, int]]]

MAX_JOINED = 4  # cues translated as one sentence at most
# a timing line: 00:01:02,500 --> 00:01:04,000, perhaps with position coordinates after it
TIMING = re.compile(r"^\s*\d+:\d+:\d+[,.]\d+\s*-->\s*\d+:\d+:\d+[,.]\d+")
BLOCK_GAP = re.compile(r"((?:\r?\n)(?:[ \t]*\r?\n)+)")  # a line break and one or more blank lines
SENTENCE_END = re.compile(r"[.!?…♪\"”»)\]]\s*$")
WRAPPER = re.compile(r"^(<([ibu]|font)\b[^>]*>)(.*)(</\2>)$", re.S | re.I)  # a tag around a cue's whole text
OVERRIDES = re.compile(r"^(?:\{\\[^}]*\}\s*)+")  # SubStation position and style tags: {\an8}
INNER_TAG = re.compile(r"</?(?:[ibu]|font)\b[^>]*>", re.I)  # formatting inside a cue's text
DASH = re.compile(r"^([-\u2010-\u2014]\s*)(?=\S)")  # the dash a speaker's line in a dialogue starts with
PAUSES = set(",;:.!?…")  # where a cut between cues or lines reads best


@dataclass
class _Cue:
    text: str  # one line of plain text: the cue's lines joined by spaces, its tags and dashes off
    lines: int
    wrappers: list[tuple[str, str]]  # the tags around its whole text, outermost first
    sentence_lines: bool  # every line a sentence of its own
    prefix: str = ""  # position tags before it all
    dashes: list[str] | None = None  # each line's dialogue dash, where every line has one
    markup: str = ""  # its text with the tags inside it, where it has some


def translate_srt(source: str, translate: Callable[[list[str]], list[str]], align: Align | None = None) -> str:
    """`source`, a SubRip file's text, with every cue's text translated by `translate` (in order, one line
    each way), tags inside cues placed by `align`; an unreadable file is a UsageError."""
    bom = "\ufeff" if source.startswith("\ufeff") else ""
    body = source[len(bom):]
    blocks = body.rstrip("\r\n")
    parts = BLOCK_GAP.split(blocks)  # block, gap, block, ...: the gaps are kept as they are
    cues = {}  # index in parts -> (its header lines, its text's line ending)
    for index in range(0, len(parts), 2):
        lines = parts[index].split("\n")
        if len(lines) >= 3 and lines[0].strip().isdigit() and TIMING.match(lines[1]):
            eol = "\r\n" if lines[0].endswith("\r") else "\n"
            cues[index] = ("\n".join(lines[:2]) + "\n", eol, "\n".join(line.removesuffix("\r") for line in lines[2:]))
    if not cues and body.strip():
        raise UsageError("not a SubRip (.srt) file: no block of a number, a timing line and text")
    order = list(cues)
    plain = [_plain(cues[index][2]) for index in order]
    groups, start = [], 0
    for end in range(1, len(order) + 1):  # a block that is no cue ends the sentences before it
        if end == len(order) or order[end] != order[end - 1] + 2:
            groups.extend([start + i for i in group] for group in _sentences(plain[start:end]))
            start = end
    texts = [" ".join(plain[i].text for i in group) for group in groups]
    shares: dict[int, str] = {}
    alone = []  # cues of a sentence whose translation has fewer words than it has cues
    for group, text, translation in zip(groups, texts, translate(texts), strict=True):
        if translation == text:
            continue
        if len(group) > 1 and len(translation.split()) < len(group):
            alone.extend(group)
            continue
        shares.update(zip(group, _share(translation, [len(plain[i].text) for i in group]), strict=True))
    if alone:
        shares.update(zip(alone, translate([plain[i].text for i in alone]), strict=True))
    for i, text in shares.items():
        if text != plain[i].text:  # else the cue stays exactly as written
            header, eol, _ = cues[order[i]]
            parts[order[i]] = header + _layout(_marked(text, plain[i], align), plain[i]).replace("\n", eol)
    return bom + "".join(parts) + body[len(blocks):]


def _plain(content: str) -> _Cue:
    content = content.replace("\r\n", "\n")
    prefix = OVERRIDES.match(content)
    prefix = prefix.group() if prefix else ""
    inner = content[len(prefix):]
    wrappers = []
    while match := WRAPPER.match(inner):
        wrappers.append((match.group(1), match.group(4)))
        inner = match.group(3)
    lines = [line.strip() for line in inner.split("\n")]
    dashes = [DASH.match(line) for line in lines]
    if all(dashes) and (len(lines) > 1 or lines[0].startswith("- ")):
        lines = [line[len(dash.group()):] for line, dash in zip(lines, dashes, strict=True)]
        dashes = [dash.group() for dash in dashes]
    else:
        dashes = None
    joined = " ".join(line for line in lines if line)
    markup = joined if INNER_TAG.search(joined) else ""
    text = " ".join(INNER_TAG.sub("", joined).split()) if markup else joined
    sentence_lines = len(lines) > 1 and all(SENTENCE_END.search(INNER_TAG.sub("", line)) for line in lines)
    return _Cue(text, max(1, len(lines)), wrappers, sentence_lines, prefix, dashes, markup)


def _marked(text: str, cue: _Cue, align: Align | None) -> str:
    """A cue's share of the translation with the tags its English had inside it, around the aligned words."""
    if not cue.markup or align is None:
        return text
    from nmt.apps.webpages import translate_html

    marked = translate_html(cue.markup, lambda texts: [text for _ in texts], align)
    return marked.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")  # the text as subtitles write it


def _sentences(cues: list[_Cue]) -> list[list[int]]:
    """Runs of consecutive cues that make one sentence: a cue that ends a sentence (or is empty) closes its
    run, as does the MAX_JOINED-th; a dialogue's cue starts one, as does a cue in another style (its position
    or formatting tags): another voice or a sign on screen."""
    groups: list[list[int]] = []
    run: list[int] = []
    for index, cue in enumerate(cues):
        before = cues[index - 1] if run else None
        if before and (cue.dashes or (cue.prefix, cue.wrappers) != (before.prefix, before.wrappers)):
            groups.append(run)
            run = []
        run.append(index)
        if not cue.text or SENTENCE_END.search(cue.text) or len(run) == MAX_JOINED:
            groups.append(run)
            run = []
    if run:
        groups.append(run)
    return groups


def _share(text: str, lengths: list[int]) -> list[str]:
    """`text` cut at spaces into len(lengths) parts in proportion to `lengths` (each part non-empty while
    there are words enough)."""
    if len(lengths) == 1:
        return [text]
    words = text.split(" ")
    total = sum(lengths) + len(lengths) - 1 or 1  # the parts' text joined by spaces
    cuts, start = [], 0
    for part in range(len(lengths) - 1):
        target = (sum(lengths[: part + 1]) + part) * len(text) / total  # where this part ends, scaled
        # the word boundary nearest the target, after the previous cut and leaving a word for each later part
        bounds = [k for k in range(start + 1, len(words)) if len(words) - k >= len(lengths) - len(cuts) - 1]
        if not bounds:
            cuts.append(start)
            continue
        # nearest to the target, where a cut after punctuation counts as a quarter of a part nearer
        k = min(bounds, key=lambda k: abs(len(" ".join(words[:k])) - target)
                - (len(text) / len(lengths) / 4 if words[k - 1][-1:] in PAUSES else 0))
        cuts.append(k)
        start = k
    edges = [0, *cuts, len(words)]
    # fewer words than parts: a part with none gets an ellipsis, as subtitles mark speech that runs on
    return [" ".join(words[a:b]) or "..." for a, b in zip(edges, edges[1:], strict=False)]


def _layout(text: str, cue: _Cue) -> str:
    """_wrapped, with the spaces inside tags kept from being cut at."""
    inside = re.sub(r"<[^>]*>", lambda tag: tag.group().replace(" ", "\0"), text)
    return _wrapped(inside, cue).replace("\0", " ")


def _wrapped(text: str, cue: _Cue) -> str:
    """`text` wrapped onto the cue's number of lines, in its tag: a sentence a line where the cue had that and
    the translation as many sentences, else cut at the spaces nearest to even lines."""
    sentences = split_sentences(text) if cue.sentence_lines else []
    if len(sentences) == cue.lines:
        lines = sentences
    else:
        lines = _share(text, [len(text) // cue.lines] * cue.lines) if cue.lines > 1 else [text]
    lines = [line for line in lines if line] or [text]
    if cue.dashes and len(lines) == len(cue.dashes):
        lines = [dash + line for dash, line in zip(cue.dashes, lines, strict=True)]
    content = "\n".join(lines)
    for opening, closing in reversed(cue.wrappers):
        content = opening + content + closing
    return cue.prefix + content
