"""Word documents: `nmt translate -i report.docx` keeps styles, lists, tables, bold runs, headers and
footers (nmt.apps.office)."""

import io
import subprocess
import sys

import docx

from nmt.apps.office import translate_docx


def report(path=None) -> bytes:
    """A document with a heading, a paragraph with a bold run, a bulleted list, a table, a header and a footer."""
    document = docx.Document()
    document.add_heading("Annual report", level=1)
    paragraph = document.add_paragraph("The ")
    paragraph.add_run("red").bold = True
    paragraph.add_run(" car is in the garage.")
    document.add_paragraph("Water the plants every morning.", style="List Bullet")
    document.add_paragraph("Read the new guide.", style="List Bullet")
    table = document.add_table(rows=2, cols=2)
    for (row, column), text in {(0, 0): "Name", (0, 1): "City", (1, 0): "Two dogs", (1, 1): "The old house"}.items():
        table.cell(row, column).text = text
    document.sections[0].header.paragraphs[0].text = "Confidential draft"
    document.sections[0].footer.paragraphs[0].text = "Page one"
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def test_a_document_with_nothing_to_translate_comes_back_byte_for_byte():
    original = report()
    assert translate_docx(original, lambda texts: texts, lambda source, target: []) == original


def test_each_french_word_takes_the_formatting_of_the_english_word_it_is_aligned_with():
    def reversed_words(texts):
        return [" ".join(reversed(text.upper().split())) for text in texts]

    def mirror(source, target):
        n = len(source.split())
        return [(i, n - 1 - i) for i in range(n)]

    out = docx.Document(io.BytesIO(translate_docx(report(), reversed_words, mirror)))
    runs = [(run.text, run.bold) for run in out.paragraphs[1].runs]
    assert runs == [("GARAGE. THE IN IS CAR ", None), ("RED", True), (" THE", None)]
    assert [p.style.name for p in out.paragraphs] == ["Heading 1", "Normal", "List Bullet", "List Bullet"]
    assert [cell.text for row in out.tables[0].rows for cell in row.cells] == ["NAME", "CITY", "DOGS TWO",
                                                                               "HOUSE OLD THE"]
    assert out.sections[0].header.paragraphs[0].text == "DRAFT CONFIDENTIAL"
    assert out.sections[0].footer.paragraphs[0].text == "ONE PAGE"


def test_runs_cut_inside_words_as_word_cuts_them_are_read_as_written():
    document = docx.Document()
    paragraph = document.add_paragraph("The old ")
    for text in ("Pa", "ris", " "):  # Word's cuts after an edit: inside a word, a run of a space alone
        paragraph.add_run(text)
    paragraph.add_run("station").bold = True
    paragraph.add_run(".")
    data = io.BytesIO()
    document.save(data)
    sent = []

    def upper(texts):
        sent.extend(texts)
        return [text.upper() for text in texts]

    out = docx.Document(io.BytesIO(translate_docx(data.getvalue(), upper,
                                                  lambda s, t: [(i, i) for i in range(len(s.split()))])))
    assert sent == ["The old Paris station."]
    assert out.paragraphs[0].text == "THE OLD PARIS STATION."
    assert [run.text.rstrip(".") for run in out.paragraphs[0].runs if run.bold] == ["STATION"]


def test_a_link_s_words_are_translated_in_their_sentence_and_stay_in_the_link():
    from docx.opc.constants import RELATIONSHIP_TYPE
    from docx.oxml import OxmlElement
    from docx.oxml.ns import qn

    document = docx.Document()
    paragraph = document.add_paragraph("Read the ")
    link = OxmlElement("w:hyperlink")
    link.set(qn("r:id"), document.part.relate_to("https://example.org/guide", RELATIONSHIP_TYPE.HYPERLINK,
                                                  is_external=True))
    run = paragraph.add_run("new guide")
    run.style = document.styles.add_style("Hyperlink", docx.enum.style.WD_STYLE_TYPE.CHARACTER)
    link.append(run._r)  # moved into the link
    paragraph._p.append(link)
    paragraph.add_run(" before you start.")
    data = io.BytesIO()
    document.save(data)
    sent = []

    def reorder(texts):  # "guide new" moves to the end, as French word order might
        sent.extend(texts)
        return ["LISEZ AVANT DE COMMENCER LE GUIDE NOUVEAU."]

    def pairs(source, target):
        return [(0, 0), (2, 6), (3, 5), (4, 1), (5, 3), (6, 4)]

    out = docx.Document(io.BytesIO(translate_docx(data.getvalue(), reorder, pairs)))
    assert sent == ["Read the new guide before you start."]  # one sentence, not three pieces
    def text(element):
        return "".join(t.text for t in element.iter(qn("w:t")))

    element = out.paragraphs[0]._p
    assert text(element) == "LISEZ AVANT DE COMMENCER LE GUIDE NOUVEAU."
    links = element.findall(qn("w:hyperlink"))
    assert len(links) == 1 and text(links[0]) == "GUIDE NOUVEAU."
    assert links[0].get(qn("r:id")) == link.get(qn("r:id"))


def test_nmt_translate_writes_the_document_in_french_with_its_structure(tmp_path):
    source, target = tmp_path / "report.docx", tmp_path / "report.fr.docx"
    source.write_bytes(report())
    done = subprocess.run([sys.executable, "-m", "nmt_cli.main", "translate", "-i", str(source), "-o", str(target),
                           "-q"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    english, french = docx.Document(str(source)), docx.Document(str(target))
    assert [p.style.name for p in french.paragraphs] == [p.style.name for p in english.paragraphs]
    assert all(f.text and f.text != e.text for f, e in zip(french.paragraphs, english.paragraphs, strict=True))
    assert [run.bold for run in french.paragraphs[1].runs].count(True) == 1
    assert len(french.tables[0].rows) == 2 and french.tables[0].cell(1, 1).text != "The old house"
    assert french.sections[0].header.paragraphs[0].text != "Confidential draft"
    bad = subprocess.run([sys.executable, "-m", "nmt_cli.main", "translate", "--input-format", "docx", "-q"],
                         input=b"not a document", capture_output=True)
    assert bad.returncode == 2 and bad.stderr.decode().startswith("error: not a Word (.docx) document")
