"""Translation memories (nmt.data.memory) and how translation uses them (nmt.decoding.translate)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from nmt.data.memory import Memory, cased_as, ratio, read_pairs, shipped_memory
from nmt.errors import UsageError

TMX = """<?xml version="1.0" encoding="UTF-8"?>
<tmx version="1.4"><header srclang="en" datatype="plaintext" segtype="sentence" adminlang="en" o-tmf="x"
creationtool="x" creationtoolversion="1"/><body>
<tu><tuv xml:lang="en-US"><seg>Sign Out</seg></tuv><tuv xml:lang="fr-FR"><seg>Se déconnecter</seg></tuv></tu>
<tu><tuv xml:lang="en"><seg>Terms of <b>Service</b></seg></tuv>
<tuv xml:lang="fr"><seg>Conditions d'utilisation</seg></tuv></tu>
</body></tmx>"""
PO = """msgid ""
msgstr "Content-Type: text/plain; charset=UTF-8\\n"

msgid "_Save"
msgstr "_Enregistrer"

msgid "Untranslated"
msgstr ""
"""


def test_exact_matches_ignore_case_spaces_and_accelerators_and_take_the_line_s_capitals(tmp_path):
    (tmp_path / "m.tmx").write_text(TMX, encoding="utf-8")
    (tmp_path / "m.po").write_text(PO, encoding="utf-8")
    (tmp_path / "m.tsv").write_text("# a comment\nCancel\tAnnuler\ncancel\tannuler\nCancel\tAbandonner\n",
                                    encoding="utf-8")
    memory = Memory.read([tmp_path / "m.tmx", tmp_path / "m.po", tmp_path / "m.tsv"])
    assert len(memory) == 6  # the untranslated entry left out
    assert [m.translation for m in memory.exact("sign  out")] == ["se déconnecter"]
    assert [m.translation for m in memory.exact("SIGN OUT")] == ["SE DÉCONNECTER"]
    assert [m.translation for m in memory.exact("Terms of Service")] == ["Conditions d'utilisation"]
    assert [m.translation for m in memory.exact("&Save")] == ["Enregistrer"]  # accelerators aside
    assert [m.translation for m in memory.exact("Cancel")] == ["Annuler"]  # the most frequent, case aside
    assert memory.exact("Sign Out")[0].origin == "m.tmx" and memory.exact("Log In") == []


def test_of_translations_differing_in_case_alone_the_one_whose_english_is_cased_as_the_line_is_used():
    memory = Memory()
    for english, french in [("SOLD OUT", "ÉPUISÉ"), ("Sold out", "Épuisé"), ("Sold out", "Epuisé")]:
        memory.add(english, french)
    assert [m.translation for m in memory.exact("Sold out")] == ["Épuisé"]  # not ÉPUISÉ, the first entry's
    assert [m.translation for m in memory.exact("sold out")] == ["épuisé"]
    assert [m.translation for m in memory.exact("SOLD OUT")] == ["ÉPUISÉ"]


def test_a_fuzzy_match_is_the_most_similar_entry_at_the_threshold_or_above():
    memory = Memory()
    for english, french in [("Open the selected file", "Ouvrir le fichier sélectionné"),
                            ("Close the selected file", "Fermer le fichier sélectionné"), ("Print", "Imprimer")]:
        memory.add(english, french)
    found = memory.fuzzy("Open the selected files", 0.85)
    assert found.kind == "fuzzy" and found.source == "Open the selected file" and 0.95 < found.score < 1
    assert memory.fuzzy("Open the selected files", 0.99) is None
    assert memory.fuzzy("Something else entirely", 0.5) is None
    fresh = Memory()
    fresh.add("Print", "Imprimer")
    assert fresh.fuzzy("Print the selected files now", 0.5) is None  # no entry is long enough to be that near
    assert fresh._trigrams is None  # so its index was not even built
    assert ratio("kitten", "sitting") == pytest.approx(1 - 3 / 7)


def test_casing_follows_the_line():
    assert cased_as("Save", "enregistrer") == "Enregistrer" and cased_as("save", "Enregistrer") == "enregistrer"
    assert cased_as("SAVE ALL", "Tout enregistrer") == "TOUT ENREGISTRER" and cased_as("42", "x") == "x"


def test_a_memory_line_that_is_no_pair_is_one_error_line(tmp_path):
    (tmp_path / "bad.tsv").write_text("no tab here\n", encoding="utf-8")
    with pytest.raises(UsageError, match="bad.tsv:1"):
        Memory.read([tmp_path / "bad.tsv"])
    with pytest.raises(UsageError, match="no such file"):
        Memory.read([tmp_path / "missing.tmx"])


PO_OF_EVERY_KIND = r"""# translator comments
msgid ""
msgstr ""
"Content-Type: text/plain; charset=UTF-8\n"
"Plural-Forms: nplurals=2; plural=(n > 1);\n"

#: src/main.c:10
#, c-format
msgid "Deleted %d files"
msgstr "%d fichiers supprimés"

msgctxt "menu"
msgid ""
"Open a "
"\"file\"\n"
msgstr "Ouvrir un "
"« fichier »\n"

#, fuzzy
msgid "Guessed"
msgstr "Deviné"

msgid "One item"
msgid_plural "%d items"
msgstr[0] "Un élément"
msgstr[1] "%d éléments"

#~ msgid "Obsolete"
#~ msgstr "Obsolète"

msgid "Back\\slash\ttab"
msgstr "Barre\\oblique\ttab"
"""


def test_a_catalog_s_translated_entries_are_read_as_polib_reads_them_a_line_at_a_time(tmp_path):
    import polib

    path = tmp_path / "every.po"
    path.write_text(PO_OF_EVERY_KIND, encoding="utf-8")
    catalog = polib.pofile(str(path))
    expected = [(entry.msgid, entry.msgstr) for entry in catalog.translated_entries() if not entry.msgid_plural]
    assert read_pairs(path).__next__  # a stream, not a list
    assert list(read_pairs(path)) == expected and len(expected) == 3  # not the fuzzy, plural, obsolete or header


@pytest.mark.parametrize("name, text, where", [
    ("open.po", 'msgid "Save\nmsgstr "Enregistrer"\n', "open.po: line 1"),
    ("quote.po", 'msgid "Say "hi""\nmsgstr "Dis"\n', "quote.po: line 1"),
    ("stray.po", 'msgid "Save"\nmsgstr "Enregistrer"\nhello\n', "stray.po: line 3"),
    ("broken.tmx", TMX.replace("</tu>\n</body>", "</tuv>\n</body>"), "broken.tmx"),
])
def test_a_broken_memory_is_refused_in_one_line_saying_where(tmp_path, name, text, where):
    (tmp_path / name).write_text(text, encoding="utf-8")
    with pytest.raises(UsageError, match=where) as refused:
        Memory.read([tmp_path / name])
    assert "\n" not in str(refused.value)


def test_memories_past_their_pairs_are_refused_as_they_are_read(tmp_path):
    (tmp_path / "big.tsv").write_text("".join(f"Line {n}\tLigne {n}\n" for n in range(1_000)), encoding="utf-8")
    assert len(Memory.read([tmp_path / "big.tsv"], most=1_000)) == 1_000
    with pytest.raises(UsageError, match="more than 999 pairs"):
        Memory.read([tmp_path / "big.tsv"], most=999)


def test_a_fuzzy_match_of_long_lines_is_found_among_near_entries():
    memory = Memory()
    paragraph = "The quarterly report covers sales, returns and the stock of every shop in the region. " * 12
    for n in range(200):
        memory.add(f"Entry {n}: {paragraph}", f"Entrée {n} : le rapport")
    found = memory.fuzzy(f"Entry 117: {paragraph}".replace("region", "area"), 0.9)
    assert found is not None and found.source.startswith("Entry 117:") and found.score > 0.9
    assert ratio("kitten", "sitting", 0.5) == pytest.approx(1 - 3 / 7) and ratio("kitten", "sitting", 0.6) == 0.0


def test_the_shipped_memory_holds_no_english_of_the_dev_sets():
    from nmt.data.corpus import load_embedded
    from nmt.data.memory import normalized

    memory = shipped_memory()
    assert len(memory) > 160_000 and memory.exact("Sign Out")
    assert "Mot de passe oublié ?" in [match.translation for match in memory.exact("Forgot your password?")]
    for name in ("software-ui", "software-ui-extra", "web-apps"):  # web-apps:dev, three projects held out whole
        assert not any(memory.exact(line) for line in load_embedded(name, "dev").source[:300])
    assert normalized("_Open  File") == "open file"


def test_translate_takes_an_exact_match_offers_a_fuzzy_one_and_says_which(tiny_checkpoint, tmp_path):
    (tmp_path / "m.tsv").write_text("A dog runs.\tUn chien court.\nTwo men are talking together.\tDeux hommes "
                                    "parlent ensemble.\n", encoding="utf-8")
    lines = "A DOG RUNS.\nTwo men are talking together now.\nA cat.\n"
    done = subprocess.run([sys.executable, "-m", "nmt_cli.main", "translate", "--model", str(tiny_checkpoint),
                           "--exact", "--memory", str(tmp_path / "m.tsv"), "--memory-threshold", "0.8", "--format",
                           "jsonl"], input=lines, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    exact, fuzzy, none = [json.loads(line) for line in done.stdout.splitlines()]
    assert exact["translation"] == "UN CHIEN COURT." and exact["memory"]["match"] == "exact"
    assert fuzzy["memory"]["match"] == "fuzzy" and fuzzy["memory"]["translation"] == "Deux hommes parlent ensemble."
    assert fuzzy["translation"] != fuzzy["memory"]["translation"]  # offered, not used
    assert "memory" not in none
