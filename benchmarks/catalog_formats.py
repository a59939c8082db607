"""How a catalog's formats come through: the French gettext catalogs of applications that no training corpus holds
(Debian 12's packages, none of software_ui's 38), their entries with a count ("%d files", "{count} new messages",
"%1$u day"), translated whole by `nmt translate -i` from this tree and scored against the applications' own
French (BLEU and chrF over every form, a plural entry's two), with the forms whose formats differ from their
English's (a lost "%m" or "%b" breaks the program's output).

    mkdir debs && cd debs && apt-get download gnome-system-monitor transmission-common thunar-data baobab \\
        gnome-disk-utility deja-dup gnome-maps gnome-contacts gnome-calendar gnome-clocks polari gnome-weather \\
        && for deb in *.deb; do dpkg -x "$deb" tree; done && cd ..
    python benchmarks/catalog_formats.py debs/tree [--model data/models/general.pt] [--translating-tree DIR]

--translating-tree: another checkout whose `nmt translate` translates (a commit before a change), the entries
chosen by this one's rules.
"""

from __future__ import annotations

import argparse
import collections
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import polib
import sacrebleu

from nmt.apps.catalogs import FORMAT, Message

IN_TRAINING = ("nautilus", "gnome-software", "file-roller", "evince")  # domains of software_ui's packages


def held_out(tree: Path) -> list[polib.MOEntry]:
    """Each English message once, from every French catalog under `tree` but the training's, that has a count."""
    entries, seen = [], set()
    for mo in sorted(tree.glob("**/fr/LC_MESSAGES/*.mo")):
        if mo.stem.startswith(IN_TRAINING):
            continue
        for entry in polib.mofile(str(mo)):
            messages = [Message.of(entry.msgid, singular=bool(entry.msgid_plural))] + (
                [Message.of(entry.msgid_plural)] if entry.msgid_plural else [])
            if entry.msgid and entry.msgid not in seen and any(any(m.piece_counts()) for m in messages):
                seen.add(entry.msgid)
                entries.append(entry)
    return entries


def forms(entry: polib.POEntry | polib.MOEntry) -> list[tuple[str, str]]:
    """(English, French) of each form."""
    if entry.msgid_plural:
        return [(entry.msgid, entry.msgstr_plural[0]), (entry.msgid_plural, entry.msgstr_plural[1])]
    return [(entry.msgid, entry.msgstr)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("tree", type=Path, help="the packages' files, unpacked")
    parser.add_argument("--model", default=None)
    parser.add_argument("--translating-tree", type=Path, default=None)
    args = parser.parse_args()
    entries = held_out(args.tree)
    pot = polib.POFile()
    pot.metadata = {"Content-Type": "text/plain; charset=UTF-8"}
    for entry in entries:
        empty = {"msgstr_plural": {0: "", 1: ""}} if entry.msgid_plural else {"msgstr": ""}
        pot.append(polib.POEntry(msgid=entry.msgid, msgid_plural=entry.msgid_plural, msgctxt=entry.msgctxt, **empty))
    with tempfile.TemporaryDirectory() as folder:
        source, target = Path(folder) / "held.pot", Path(folder) / "fr.po"
        pot.save(str(source))
        model = ["--model", args.model] if args.model else []
        tree = {"PYTHONPATH": str(args.translating_tree.resolve())} if args.translating_tree else {}
        subprocess.run([sys.executable, "-m", "nmt_cli.main", "translate", "-i", str(source), "-o", str(target), "-q",
                        *model], check=True, env={**os.environ, **tree},
                       cwd=args.translating_tree.resolve() if args.translating_tree else None)
        french = {(entry.msgctxt, entry.msgid): entry for entry in polib.pofile(str(target))}
    hypotheses, references, broken = [], [], 0
    for entry in entries:
        for (english, reference), (_, translated) in zip(forms(entry), forms(french[(entry.msgctxt, entry.msgid)]),
                                                         strict=True):
            hypotheses.append(translated)
            references.append(reference)
            broken += collections.Counter(FORMAT.findall(english)) != collections.Counter(FORMAT.findall(translated))
    bleu = sacrebleu.corpus_bleu(hypotheses, [references]).score
    chrf = sacrebleu.corpus_chrf(hypotheses, [references]).score
    print(f"{len(entries)} entries, {len(hypotheses)} forms: BLEU {bleu:.2f}, chrF {chrf:.2f}, formats differing from "
          f"the English: {broken}")


if __name__ == "__main__":
    main()
