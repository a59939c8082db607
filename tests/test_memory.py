"""Translation memories (nmt.data.memory) and how translation uses them (nmt.decoding.translate)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from nmt.data.memory import Memory, cased_as, ratio, shipped_memory
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
