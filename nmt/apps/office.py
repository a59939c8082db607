"""Word documents (.docx) translated with their styles, tables, lists, headers and footers kept.

    french = translate_docx(english_bytes, translate, align)   # bytes of a .docx in, bytes of one out

python-docx reads the document. Every paragraph with text (in the body, in table cells at any depth, in
every section's headers and footers) is translated as one line. A paragraph's text is spread over runs,
each with its own formatting (bold, italics, a font, a link's style), and Word cuts runs where it likes,
inside words too ("Pa" "ris", after an edit or a spelling mark): the runs' text is read as written, and
the French words go to the run where the English words they are aligned with (nmt.decoding.alignment)
begin, consecutive words of one run staying together, so a bold word's translation stays bold; a link's
words go back into a copy of the link. Runs that hold more than text (a picture, a field, a tab) stay
where they are; a paragraph with such runs has only its text runs translated, each on its own. A document
in which no text changed is returned byte for byte.
"""

from __future__ import annotations

import bisect
import copy
import io
import re
import zipfile
from collections.abc import Callable, Iterator

from nmt.errors import FileRefused, UsageError, first_line

W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
PLAIN_RUN_CHILDREN = {W + "rPr", W + "t"}  # a run of formatting and text alone


def translate_docx(document: bytes, translate: Callable[[list[str]], list[str]],
                   align: Callable[[str, str], list[tuple[int, int]]]) -> bytes:
    """`document` (a .docx file's bytes) with the text of its paragraphs translated."""
    try:
        import docx
        from docx.opc.exceptions import PackageNotFoundError
    except ImportError:
        raise UsageError("Word documents need python-docx: pip install 'nmt-transformer[docx]'") from None
    from lxml import etree

    try:
        declares_entities(document)
        parsed = docx.Document(io.BytesIO(document))
    except (PackageNotFoundError, KeyError, ValueError, zipfile.BadZipFile, etree.LxmlError) as exc:
        raise FileRefused(f"cannot read the file as a Word (.docx) document: {first_line(exc)}") from None
    from docx.text.run import Run

    units = []  # (paragraph, runs): runs translated together as one line
    for paragraph in _paragraphs(parsed):
        every = [Run(element, paragraph) for element in paragraph._p.iter(W + "r")]  # in links too
        runs = [run for run in every if run.text.strip()]
        if not runs:
            continue
        simple = all(_top(run._r) is not None and {child.tag for child in run._r} <= PLAIN_RUN_CHILDREN
                     for run in every)
        if simple:  # all its runs, those of spaces alone too: the text as written
            units.append((paragraph, [run for run in every if run.text]))
        else:  # pictures, fields or tabs among the runs: each text run alone, the rest untouched
            units.extend((paragraph, [run]) for run in runs)
    sources = [" ".join("".join(run.text for run in runs).split()) for _, runs in units]
    translations = translate(sources)
    changed = False
    for (_, runs), source, translation in zip(units, sources, translations, strict=True):
        if translation != source:
            _rewrite(runs, source, translation, align if len(runs) > 1 else None)
            changed = True
    if not changed:
        return document
    out = io.BytesIO()
    parsed.save(out)
    return out.getvalue()


def declares_entities(document: bytes) -> None:
    """Refuse a document whose XML parts declare a document type or entities (Word never writes them; a
    "billion laughs" needs them): python-docx's parser leaves entities unresolved (resolve_entities=False),
    and libxml2 caps their amplification, but neither should be reached. Called after nmt.apps.files.check_zip
    has bounded what the parts inflate to."""
    try:
        archive = zipfile.ZipFile(io.BytesIO(document))
    except (zipfile.BadZipFile, ValueError, EOFError) as exc:
        raise FileRefused(f"cannot read the file as a Word (.docx) document: not a readable zip ({exc})") from None
    with archive:
        for member in archive.infolist():
            if member.filename.endswith((".xml", ".rels")):
                with archive.open(member) as part:
                    head = part.read(4096)
                if b"<!DOCTYPE" in head or b"<!ENTITY" in head:
                    raise FileRefused(f"cannot read the file as a Word (.docx) document: its part {member.filename} "
                                      "declares XML entities (Word never does; an entity bomb?)")


def _paragraphs(document) -> Iterator:
    """Every paragraph: the body's and its tables' (nested too), then each section's headers and footers."""
    seen = set()

    def walk(container):
        yield from container.paragraphs
        for table in getattr(container, "tables", []):
            for row in table.rows:
                for cell in row.cells:
                    if id(cell._tc) not in seen:  # a merged cell appears once per grid position
                        seen.add(id(cell._tc))
                        yield from walk(cell)

    yield from walk(document)
    for section in document.sections:
        for part in (section.header, section.first_page_header, section.even_page_header, section.footer,
                     section.first_page_footer, section.even_page_footer):
            if not part.is_linked_to_previous:
                yield from walk(part)


def _top(run):
    """The paragraph's child that holds `run`: the run, or the link it is in; None if it is deeper."""
    parent = run.getparent()
    if parent.tag == W + "p":
        return run
    return parent if parent.tag == W + "hyperlink" and parent.getparent().tag == W + "p" else None


def _rewrite(runs: list, source: str, translation: str, align) -> None:
    """The runs' text replaced by `translation`: each French word in the run of the English word it is
    aligned with (else the run of the word before it), consecutive words of a run in one copy of it (in a
    copy of its link, if it was in one)."""
    words = translation.split()
    if align is None or not words:
        _set_text(runs[0]._r, translation)
        _remove([run._r for run in runs[1:]])
        return
    ends = []  # where each run's text ends in the paragraph's
    for run in runs:
        ends.append((ends[-1] if ends else 0) + len(run.text))
    # the run of each English word: where it begins
    owner = [bisect.bisect_right(ends, word.start()) for word in re.finditer(r"\S+", "".join(r.text for r in runs))]
    aligned: dict[int, int] = {}
    for i, j in sorted(align(source, translation)):
        if i < len(owner):
            aligned.setdefault(j, owner[i])
    groups: list[tuple[int, list[str]]] = []
    current = aligned.get(0, 0)
    for j, word in enumerate(words):
        current = aligned.get(j, current)
        if groups and groups[-1][0] == current:
            groups[-1][1].append(word)
        else:
            groups.append((current, [word]))
    texts = [" ".join(group) for _, group in groups]
    for offset in range(len(groups) - 1):  # the space between two runs goes to a run that had spaces at its edges
        before, after = runs[groups[offset][0]].text, runs[groups[offset + 1][0]].text
        if not before[-1:].isspace() and (after[:1].isspace() or after[-1:].isspace()):
            texts[offset + 1] = " " + texts[offset + 1]
        else:
            texts[offset] += " "
    links = [run._r.getparent() if run._r.getparent().tag == W + "hyperlink" else None for run in runs]
    paragraph = runs[0]._r.getparent() if links[0] is None else links[0].getparent()
    position = paragraph.index(_top(runs[0]._r))
    _remove([run._r for run in runs])
    shells = {id(link): copy.deepcopy(link) for link in links if link is not None}  # the links, emptied
    items, last_link = [], None
    for (index, _), text in zip(groups, texts, strict=True):
        element = copy.deepcopy(runs[index]._r)
        _set_text(element, text)
        link = links[index]
        if link is None:
            items.append(element)
        elif link is last_link:
            items[-1].append(element)
        else:
            items.append(copy.deepcopy(shells[id(link)]))
            items[-1].append(element)
        last_link = link
    for offset, item in enumerate(items):
        paragraph.insert(position + offset, item)


def _remove(runs: list) -> None:
    """The runs out of their paragraph, and the links they leave empty."""
    for run in runs:
        parent = run.getparent()
        parent.remove(run)
        if parent.tag == W + "hyperlink" and parent.find(W + "r") is None and parent.getparent() is not None:
            parent.getparent().remove(parent)


def _set_text(run, text: str) -> None:
    """A run's text (its first w:t; any others removed), spaces kept."""
    texts = run.findall(W + "t")
    for extra in texts[1:]:
        run.remove(extra)
    texts[0].text = text
    texts[0].set("{http://www.w3.org/XML/1998/namespace}space", "preserve")
