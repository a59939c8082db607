"""Gettext catalogs (nmt.apps.catalogs): a .pot that xgettext makes from a small program, translated into a French
.po that keeps every placeholder and accelerator, fills plurals, keeps what was translated, and passes GNU
gettext's msgfmt --check."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import polib
import pytest

from nmt.apps.catalogs import CatalogOptions, Message, translate_po

PROGRAM = Path(__file__).parent / "files" / "gettext" / "app.py"
POT = """msgid ""
msgstr ""
"Content-Type: text/plain; charset=UTF-8\\n"

#. Translators: a button
msgctxt "verb"
msgid "_Open File"
msgstr ""

#, c-format
msgid "Could not save %s: %d%% done, <b>%1$s</b>."
msgstr ""

#, python-format, python-brace-format
msgid "Deleted %(count)d files from {folder}."
msgid_plural "Deleted files from {folder}."
msgstr[0] ""
msgstr[1] ""

msgid "Line one\\nline two\\n"
msgstr ""

msgid "&Quit"
msgstr ""

msgid "Already done"
msgstr "Déjà fait"

#~ msgid "Old"
#~ msgstr "Vieux"
"""


def dropping(texts: list[str]) -> list[str]:
    """A model that drops every placeholder and writes in capitals."""
    import re

    return [re.sub("\u2985\\d\u2986", "", text).upper() for text in texts]


def test_every_placeholder_and_accelerator_comes_back_where_the_model_dropped_them():
    french = polib.pofile(translate_po(POT, dropping))
    by_id = {entry.msgid: entry for entry in french}
    assert by_id["_Open File"].msgstr == "_OPEN FILE" and by_id["_Open File"].msgctxt == "verb"
    assert by_id["_Open File"].comment == "Translators: a button"
    formats = by_id["Could not save %s: %d%% done, <b>%1$s</b>."].msgstr
    for kept in ("%s", "%d", "%%", "<b>", "%1$s", "</b>"):
        assert formats.count(kept) == 1, formats
    plural = by_id["Deleted %(count)d files from {folder}."]
    assert "%(count)d" in plural.msgstr_plural[0] and "{folder}" in plural.msgstr_plural[0]
    assert "{folder}" in plural.msgstr_plural[1] and "%(count)d" not in plural.msgstr_plural[1]
    assert by_id["Line one\nline two\n"].msgstr == "LINE ONE\nLINE TWO\n"  # its own line breaks kept
    assert by_id["&Quit"].msgstr == "&QUIT"
    assert by_id["Already done"].msgstr == "Déjà fait" and "fuzzy" not in by_id["Already done"].flags
    assert all("fuzzy" in entry.flags for entry in french if entry.msgid != "Already done" and not entry.obsolete)
    assert [entry.msgid for entry in french.obsolete_entries()] == ["Old"]
    assert french.metadata["Language"] == "fr" and french.metadata["Plural-Forms"] == "nplurals=2; plural=(n > 1);"
    again = translate_po(POT, dropping, CatalogOptions(overwrite=True, fuzzy=False))
    entry = {entry.msgid: entry for entry in polib.pofile(again)}["Already done"]
    assert entry.msgstr == "ALREADY DONE" and "fuzzy" not in entry.flags


def test_the_accelerator_goes_before_the_same_letter_of_the_french():
    message = Message.of("Save _As…")
    assert message.pieces() == ["Save As…"]
    assert message.restored(["Enregistrer sous…"]) == "_Enregistrer sous…"  # no a: before the first letter
    assert Message.of("_File").restored(["Fichier"]) == "_Fichier"
    assert Message.of("Open _Recent").restored(["Ouvrir récent"]) == "Ouvrir _récent"
    assert Message.of("snake_case and AT&T").accelerator is None
    assert Message.of("Fish &amp; chips").accelerator is None


@pytest.mark.gettext
def test_a_pot_made_by_xgettext_becomes_a_french_po_that_msgfmt_checks(tiny_checkpoint, tmp_path):
    pot, po = tmp_path / "app.pot", tmp_path / "fr.po"
    subprocess.run(["xgettext", "--language=Python", "--keyword=pgettext:1c,2", "--add-comments=Translators",
                    "--from-code=UTF-8", "-o", str(pot), str(PROGRAM)], check=True)
    done = subprocess.run([sys.executable, "-m", "nmt_cli.main", "translate", "--model", str(tiny_checkpoint),
                           "--exact", "-i", str(pot), "-o", str(po), "--no-fuzzy", "-q"], capture_output=True,
                          text=True)
    assert done.returncode == 0, done.stderr
    check = subprocess.run(["msgfmt", "--check", "-o", str(tmp_path / "fr.mo"), str(po)], capture_output=True,
                           text=True)
    assert check.returncode == 0, check.stderr  # formats match their msgid's, plural forms and header are French
    french = polib.pofile(str(po))
    english = polib.pofile(str(pot))
    assert len(french) == len(english) and french.percent_translated() == 100
    assert str(polib.pofile(french.__unicode__())) == str(french)  # polib reads back what it wrote
