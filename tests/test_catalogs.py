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
from nmt.errors import FileRefused

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


def test_an_entry_whose_formats_would_not_all_come_back_stays_untranslated_never_corrupt():
    """Ten formats in one line: the tenth went to the model raw ("%d" -> "% de"): such an entry is left for a
    translator, and the others are translated."""
    many = " ".join(f"%{n}$d" for n in range(1, 12))
    pot = POT + f'\n#, c-format\nmsgid "Totals: {many}"\nmsgstr ""\n'

    def mangling(texts: list[str]) -> list[str]:  # a model that writes a raw %d as French words
        return [text.replace("%11$d", "% de").upper() for text in texts]

    french = {entry.msgid: entry for entry in polib.pofile(translate_po(pot, mangling))}
    assert french[f"Totals: {many}"].msgstr == "" and "fuzzy" not in french[f"Totals: {many}"].flags
    assert french["&Quit"].msgstr == "&QUIT"


KEPT_AND_OPEN = POT + """
msgid "One file"
msgid_plural "%d files"
msgstr[0] "Un fichier"
msgstr[1] "%d fichiers"
msgstr[2] "%d fichiers (plus)"

msgid "Done\\n"
msgstr ""
"""


def test_what_msgfmt_would_refuse_is_marked_and_said_and_a_string_left_open_is_refused():
    def losing_line_ends(texts: list[str]) -> list[str]:
        return [text.strip("\n").upper() for text in texts]

    many = " ".join(f"%{n}$d" for n in range(1, 12))
    pot = KEPT_AND_OPEN + f'\n#, c-format\nmsgid "Totals: {many}"\nmsgstr ""\n'
    french = {entry.msgid: entry for entry in polib.pofile(translate_po(pot, losing_line_ends,
                                                                        CatalogOptions(fuzzy=False)))}
    kept = french["One file"]  # three forms under French's two: kept for the translator, marked, said why
    assert kept.msgstr_plural[2] == "%d fichiers (plus)" and "fuzzy" in kept.flags and "3 plural forms" in kept.tcomment
    assert french["Done\n"].msgstr == "DONE\n" and french["Line one\nline two\n"].msgstr == "LINE ONE\nLINE TWO\n"
    assert "formats did not all come back" in french[f"Totals: {many}"].tcomment
    with pytest.raises(FileRefused, match="line 3: a string left open"):
        translate_po('msgid ""\nmsgstr ""\nmsgid "Save\nmsgstr "Enregistrer"\n', losing_line_ends)


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


@pytest.mark.gettext
def test_a_catalog_with_kept_translations_msgfmt_would_refuse_comes_out_checked(tmp_path):
    pot, po = tmp_path / "kept.po", tmp_path / "fr.po"
    pot.write_text(KEPT_AND_OPEN, encoding="utf-8")
    po.write_text(translate_po(KEPT_AND_OPEN, lambda texts: [text.strip("\n") for text in texts],
                               CatalogOptions(fuzzy=False)), encoding="utf-8")
    check = subprocess.run(["msgfmt", "--check", "-o", str(tmp_path / "fr.mo"), str(po)], capture_output=True,
                           text=True)
    assert check.returncode == 0, check.stderr


def test_a_count_goes_to_the_model_as_a_number_and_comes_back_where_french_puts_it():
    """"%d files" went to the model as "⦅1⦆ files", which it wrote "Fichiers ⦅1⦆" (files number %d); a count now
    goes as a number that the model places as French places a count, and comes back as its format."""
    asked = []

    def french(texts: list[str]) -> list[str]:
        asked.append(texts)
        return [{"Deleted 5 files in \u29852\u2986.": "5 fichiers supprimés dans \u29852\u2986.",
                 "1 file": "1 fichier", "5 files": "5 fichiers", "Item 5 of 7": "Élément 5 sur 7",
                 "Page 5": "Page cinq", "5 Selected": "5 Selected",
                 "\u29851\u2986 Selected": "\u29851\u2986 sélectionnés"}.get(text, text) for text in texts]

    pot = POT.split("\n\n")[0] + "\n\n" + "\n\n".join([
        '#, c-format\nmsgid "Deleted %d files in %s."\nmsgstr ""',
        '#, c-format\nmsgid "%d file"\nmsgid_plural "%d files"\nmsgstr[0] ""\nmsgstr[1] ""',
        '#, c-format\nmsgid "Item %d of %d"\nmsgstr ""', '#, c-format\nmsgid "Page %d"\nmsgstr ""',
        '#, c-format\nmsgid "%d Selected"\nmsgstr ""']) + "\n"
    by_id = {entry.msgid: entry for entry in polib.pofile(translate_po(pot, french))}
    assert by_id["Deleted %d files in %s."].msgstr == "%d fichiers supprimés dans %s."
    assert by_id["%d file"].msgstr_plural == {0: "%d fichier", 1: "%d fichiers"}
    assert by_id["Item %d of %d"].msgstr == "Élément %d sur %d"
    # "cinq": the number did not come back, so the line is asked again with its count as a placeholder; so is a
    # line that came back as it went
    assert asked[1] == ["Page \u29851\u2986", "\u29851\u2986 Selected"] and by_id["Page %d"].msgstr == "Page %d"
    assert by_id["%d Selected"].msgstr == "%d sélectionnés"


def test_a_count_inside_other_formats_stays_a_placeholder():
    for msgid in ("%d:%02d left", "%d%% done", "%d/%d copied", "file%d.txt saved"):
        assert Message.of(msgid).pieces() == Message.of(msgid).pieces(counted=False), msgid
    assert Message.of("Deleted %(count)d files from {folder}.").pieces() == ["Deleted 5 files from \u29852\u2986."]
    assert Message.of("{count} new messages").pieces() == ["5 new messages"]
    assert Message.of("%d items in 5 folders").pieces() == ["7 items in 5 folders"]  # a number of its own kept apart
