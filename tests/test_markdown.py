"""Markdown: `nmt translate -i notes.md` translates headings, paragraphs, items, quotes and cells, and keeps
the markup, links and code (nmt.apps.markdown)."""

import subprocess
import sys
from pathlib import Path

from nmt.apps.markdown import translate_markdown

NOTES = Path(__file__).parent / "files" / "notes.md"


def test_a_document_with_nothing_to_translate_comes_back_byte_for_byte():
    text = NOTES.read_text(encoding="utf-8")
    assert translate_markdown(text, lambda texts: texts, lambda source, target: []) == text


def test_the_markup_stays_around_its_words_and_code_stays_as_written():
    def upper(texts):
        return [text.upper() for text in texts]

    def same_order(source, target):
        return [(i, i) for i in range(len(source.split()))]

    out = translate_markdown(NOTES.read_text(encoding="utf-8"), upper, same_order).split("\n")
    assert out[0] == "# OUR SMALL GARDEN"
    assert out[2] == ('THE **RED** ROSES GROW NEAR THE [OLD WOODEN DOOR](https://example.org/door "DOOR"). '
                      "TWO DOGS ARE PLAYING IN THE SNOW.")  # a paragraph of two lines: one line now
    assert "- READ THE *NEW* GUIDE WITH `make garden`." in out and "> A QUOTE ABOUT THE RAIN." in out
    assert "| ROSES | NEAR THE DOOR |" in out and 'print("A dog runs.")' in out
    assert out[-3:] == ["SETEXT TITLE", "============", ""]


def test_nmt_translate_writes_the_markdown_in_french(tmp_path):
    out = tmp_path / "notes.fr.md"
    done = subprocess.run([sys.executable, "-m", "nmt_cli.main", "translate", "-i", str(NOTES), "-o", str(out), "-q"],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    french = out.read_text()
    assert french.startswith("# ") and "](https://example.org/door" in french and "`make garden`" in french
    assert '```python\nprint("A dog runs.")\n```' in french and "Our small garden" not in french


def test_task_list_boxes_stay_as_written():
    document = "# Tasks\n\n- [ ] Buy milk\n- [x] Call *Bob*\n- A plain item\n"
    seen = []

    def translate(texts):
        seen.extend(texts)
        return [text.upper() for text in texts]

    out = translate_markdown(document, translate, lambda source, target: [(i, i) for i in range(len(source.split()))])
    assert out == "# TASKS\n\n- [ ] BUY MILK\n- [x] CALL *BOB*\n- A PLAIN ITEM\n"
    assert "Buy milk" in seen and not any("[" in text for text in seen)  # the box is not the model's
