"""XLIFF 1.2 and 2.0 files (nmt.apps.xliff): targets filled for review, sources and the rest kept."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from lxml import etree

from nmt.apps.catalogs import CatalogOptions
from nmt.apps.files import FileRefused
from nmt.apps.xliff import NS_2, NS_12, translate_xliff

FILES = Path(__file__).parent / "files" / "xliff"


def dropping(texts: list[str]) -> list[str]:
    """A model that drops every placeholder and writes in capitals."""
    return [re.sub("\u2985\\d\u2986", "", text).upper() for text in texts]


def units(data: bytes, namespace: str, holder: str) -> dict:
    root = etree.fromstring(data)
    return {unit.get("id"): unit for unit in root.iter(f"{{{namespace}}}{holder}")}


def test_xliff_1_2_targets_are_filled_for_review_with_their_inline_elements_and_the_rest_kept():
    english = (FILES / "app-1.2.xlf").read_bytes()
    french = translate_xliff(english, dropping)
    q = lambda name: f"{{{NS_12}}}{name}"  # noqa: E731
    root = etree.fromstring(french)
    assert [file.get("target-language") for file in root.iter(q("file"))] == ["fr"]
    found = units(french, NS_12, "trans-unit")
    assert found["open"].find(q("target")).text == "OPEN THE FILE"
    assert found["open"].find(q("target")).get("state") == "needs-review-translation"
    bold = found["bold"].find(q("target"))
    assert [child.tag for child in bold] == [q("g"), q("x")] and bold.find(q("g")).get("id") == "1"
    assert " ".join("".join(bold.itertext()).split()) == "CLICK SAVE TO KEEP CHANGES & GO."
    assert b"CHANGES &amp; GO." in french.replace(b"  ", b" ")
    assert found["bold"].find(q("note")).text == "A button label inside"
    code = found["code"].find(q("target"))
    assert code.find(q("ph")).text == "<Ctrl>"  # a code element whole
    assert found["done"].find(q("target")).text == "Déjà fait"  # translated already: kept
    assert found["brand"].find(q("target")) is None  # translate="no"
    def sources(found: dict) -> dict:  # each source as it was, but for the whitespace after it
        return {name: etree.tostring(unit.find(q("source")), with_tail=False) for name, unit in found.items()}

    assert sources(found) == sources(units(english, NS_12, "trans-unit"))
    again = units(translate_xliff(english, dropping, CatalogOptions(overwrite=True, fuzzy=False)), NS_12,
                  "trans-unit")
    assert again["done"].find(q("target")).text == "ALREADY DONE"
    assert again["done"].find(q("target")).get("state") == "translated"


def test_the_formats_of_a_unit_s_text_come_back_and_its_count_stands_where_french_puts_it():
    """"Deleted %d files in %@." came out "Supprimer % des fichiers en %@." and "Hello, %1$s!" "Héllo,1 $ !": a
    format in the text is a placeholder as a tag is, and a count goes to the model as a number."""
    english = f'''<?xml version="1.0" encoding="UTF-8"?>
<xliff version="1.2" xmlns="{NS_12}"><file source-language="en" datatype="plaintext" original="app"><body>
<trans-unit id="count"><source>Deleted %d files in %@ &amp; <g id="1">{{folder}}</g>.</source></trans-unit>
<trans-unit id="hello"><source>Hello, %1$s! 100%% sure.</source></trans-unit>
</body></file></xliff>'''.encode()
    asked = []

    def french(texts: list[str]) -> list[str]:
        asked.extend(texts)
        return ["5 FICHIERS SUPPRIMÉS DANS \u29852\u2986 & \u29853\u2986\u29854\u2986\u29855\u2986."
                if text.startswith("Deleted") else dropping([text])[0] for text in texts]

    found = units(translate_xliff(english, french), NS_12, "trans-unit")
    q = lambda name: f"{{{NS_12}}}{name}"  # noqa: E731
    assert asked[0] == "Deleted 5 files in \u29852\u2986 & \u29853\u2986\u29854\u2986\u29855\u2986."
    count = found["count"].find(q("target"))
    assert "".join(count.itertext()) == "%d FICHIERS SUPPRIMÉS DANS %@ & {folder}."
    assert count.find(q("g")).text == "{folder}"
    hello = "".join(found["hello"].find(q("target")).itertext())  # dropped by the model: put back where they stood
    assert hello.count("%1$s") == 1 and hello.count("%%") == 1 and "HELLO" in hello


def test_a_unit_of_more_codes_than_placeholders_stays_untranslated_never_given_its_english():
    codes = " ".join(f'<x id="{n}"/>%{n}$d' for n in range(1, 7))  # 12 codes and formats: more than 9
    english = f'''<?xml version="1.0" encoding="UTF-8"?>
<xliff version="1.2" xmlns="{NS_12}"><file source-language="en" datatype="plaintext" original="app"><body>
<trans-unit id="many"><source>Totals {codes} done</source></trans-unit>
<trans-unit id="open"><source>Open the file</source></trans-unit>
</body></file></xliff>'''.encode()
    import logging

    said: list[str] = []
    handler = logging.Handler(logging.WARNING)
    handler.emit = lambda record: said.append(record.getMessage())
    logger = logging.getLogger("nmt")  # a CLI test before may have set it quiet, and kept it from the root
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.WARNING)
    try:
        found = units(translate_xliff(english, dropping, CatalogOptions(fuzzy=False)), NS_12, "trans-unit")
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
    q = lambda name: f"{{{NS_12}}}{name}"  # noqa: E731
    assert found["many"].find(q("target")) is None  # was its English, marked translated
    assert found["open"].find(q("target")).text == "OPEN THE FILE"
    assert any("1 of the XLIFF file's units left untranslated" in line for line in said)


def test_xliff_2_segments_are_filled_and_marked_as_machine_translations():
    french = translate_xliff((FILES / "app-2.0.xlf").read_bytes(), dropping)
    q = lambda name: f"{{{NS_2}}}{name}"  # noqa: E731
    root = etree.fromstring(french)
    assert root.get("trgLang") == "fr"
    segments = [segment for segment in root.iter(q("segment"))]
    first, click, done, brand = segments
    assert first.find(q("target")).text == "OPEN THE FILE"
    assert (first.get("state"), first.get("subState")) == ("translated", "nmt:machine")
    assert [child.tag for child in click.find(q("target"))] == [q("pc"), q("ph")]
    assert done.find(q("target")).text == "Déjà fait." and done.get("state") == "final"
    assert brand.find(q("target")) is None


def test_an_xliff_file_that_declares_entities_or_is_no_xliff_is_refused():
    bomb = b'<?xml version="1.0"?><!DOCTYPE x [<!ENTITY a "aaaa">]><xliff version="1.2"/>'
    with pytest.raises(FileRefused, match="entities"):
        translate_xliff(bomb, dropping)
    with pytest.raises(FileRefused, match="XLIFF"):
        translate_xliff(b"<html><body>Hi</body></html>", dropping)
    with pytest.raises(FileRefused, match="cannot read"):
        translate_xliff(b"<xliff", dropping)


def test_nmt_translate_writes_an_xliff_file_with_the_model(tiny_checkpoint, tmp_path):
    out = tmp_path / "app.fr.xlf"
    done = subprocess.run([sys.executable, "-m", "nmt_cli.main", "translate", "--model", str(tiny_checkpoint),
                           "--exact", "-i", str(FILES / "app-1.2.xlf"), "-o", str(out), "-q"], capture_output=True,
                          text=True)
    assert done.returncode == 0, done.stderr
    found = units(out.read_bytes(), NS_12, "trans-unit")
    assert all(found[name].find(f"{{{NS_12}}}target") is not None for name in ("open", "bold", "code", "done"))
