"""Markdown translated in place: headings, paragraphs, list items, quotes and table cells; code and the
markup around the text kept.

    french = translate_markdown(text, translate, align)

markdown-it-py (CommonMark, with tables) finds each block's inline text and the lines it stands on. The
inline text is rendered to HTML and translated as nmt.apps.webpages translates a block, so that **bold**,
*emphasis*, [links](url) and `code` follow their words, then written back as Markdown in place of the
English, after the block's own prefix (`# `, `- `, `> `, a table's `|`). A paragraph over several lines
becomes one line. Fenced and indented code, HTML blocks and front matter are left as they are, as is a
block whose translation equals its text: a document with nothing to translate comes back byte for byte.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from html.parser import HTMLParser

from nmt.apps.webpages import translate_html

MARKS = {"strong": "**", "b": "**", "em": "*", "i": "*", "s": "~~", "del": "~~"}
TASK_BOX = re.compile(r"\[[ xX]\] ")  # a task list item's box, "- [ ] Buy milk": kept, not translated


class _ToMarkdown(HTMLParser):
    """The inline HTML markdown-it renders (and webpages rewrites) back to Markdown."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.out: list[str] = []
        self.links: list[str] = []
        self.code = False

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag in MARKS:
            self.out.append(MARKS[tag])
        elif tag == "a":
            self.out.append("[")
            title = f' "{attrs["title"]}"' if attrs.get("title") else ""
            self.links.append(f"]({attrs.get('href', '')}{title})")
        elif tag == "code":
            self.out.append("`")
            self.code = True
        elif tag == "img":
            self.out.append(f"![{attrs.get('alt', '')}]({attrs.get('src', '')})")
        elif tag == "br":
            self.out.append("  \n")

    def handle_endtag(self, tag):
        if tag in MARKS:
            self.out.append(MARKS[tag])
        elif tag == "a" and self.links:
            self.out.append(self.links.pop())
        elif tag == "code":
            self.out.append("`")
            self.code = False

    def handle_data(self, data):
        if self.code:
            self.out.append(data)
        else:  # what Markdown would read as markup stays text
            self.out.append("".join("\\" + c if c in "\\`*_[]" else c for c in data))


def _markdown(fragment: str) -> str:
    converter = _ToMarkdown()
    converter.feed(fragment)
    converter.close()
    return "".join(converter.out)


def translate_markdown(text: str, translate: Callable[[list[str]], list[str]],
                       align: Callable[[str, str], list[tuple[int, int]]]) -> str:
    """`text` (a Markdown document) with the inline text of its blocks translated."""
    from markdown_it import MarkdownIt

    md = MarkdownIt("commonmark").enable("table")
    tokens = md.parse(text)
    lines = text.split("\n")
    blocks = [token for token in tokens if token.type == "inline" and token.map and token.content.strip()]
    fragments = [md.renderer.renderInline(token.children or [], md.options, {}) for token in blocks]
    boxes = [box.group() if (box := TASK_BOX.match(token.content)) and fragment.startswith(box.group()) else ""
             for token, fragment in zip(blocks, fragments, strict=True)]
    translated = [box + translate_html(fragment[len(box):], translate, align)
                  for fragment, box in zip(fragments, boxes, strict=True)]
    searched_from: dict[int, int] = {}  # where the next block on a line is looked for (table cells)
    for token, fragment, french, box in zip(blocks, fragments, translated, boxes, strict=True):
        if french == fragment:
            continue
        content = token.content.split("\n")
        first = token.map[0]
        at = lines[first].find(content[0], searched_from.get(first, 0))
        if at < 0:
            continue  # the text is not on its line as written (an escape markdown-it resolved): left as it is
        new = box + _markdown(french[len(box):])  # a task box as written: _markdown would escape its brackets
        lines[first] = lines[first][:at] + new + lines[first][at + len(content[0]):]
        searched_from[first] = at + len(new)
        for offset, rest in enumerate(content[1:], start=1):  # the paragraph's other lines, now on the first
            index = first + offset
            where = lines[index].find(rest) if index < len(lines) and lines[index] is not None else -1
            if where >= 0:
                lines[index] = lines[index][:where] + lines[index][where + len(rest):]
                if not lines[index].strip(" >"):
                    lines[index] = None
    return "\n".join(line for line in lines if line is not None)
