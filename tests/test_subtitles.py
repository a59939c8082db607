"""Subtitle files: `nmt translate -i film.srt` keeps numbering, timings, line layout and tags (nmt.apps.subtitles)."""

import subprocess
import sys
from pathlib import Path

import srt

from nmt.apps.subtitles import _share, translate_srt

DIALOGUE = Path(__file__).parent / "files" / "dialogue.srt"
FILM = Path(__file__).parent / "files" / "film.srt"  # a film's file as releases write them: BOM, CRLF, tags


def test_a_file_with_nothing_to_translate_comes_back_byte_for_byte():
    text = DIALOGUE.read_text(encoding="utf-8")
    for variant in (text, text.replace("\n", "\r\n"), "\ufeff" + text):
        assert translate_srt(variant, lambda lines: lines) == variant


def test_a_sentence_over_several_cues_is_translated_whole_and_shared_back_in_proportion():
    seen = []

    def translate(lines):
        seen.extend(lines)
        return [line.upper() for line in lines]

    out = list(srt.parse(translate_srt(DIALOGUE.read_text(encoding="utf-8"), translate)))
    assert "He left for the station about an hour ago, before the rain started." in seen  # cues 2 and 3 as one
    assert [cue.content for cue in out[1:3]] == ["HE LEFT FOR THE STATION",
                                                 "ABOUT AN HOUR AGO,\nBEFORE THE RAIN STARTED."]
    assert out[3].content == "<i>I NEVER TRUSTED THAT MAN.</i>"
    assert _share("un deux trois quatre cinq six", [10, 10]) == ["un deux trois", "quatre cinq six"]
    assert _share("un, deux trois quatre", [6, 14]) == ["un,", "deux trois quatre"]  # after the comma: near enough
    assert _share("a b", [5, 5, 5]) == ["...", "a", "b"]  # never an empty cue


def test_a_release_keeps_its_position_tags_colours_and_dialogue_dashes():
    text = FILM.read_text(encoding="utf-8-sig")
    raw = FILM.read_bytes().decode("utf-8")
    assert translate_srt(raw, lambda lines: lines) == raw
    seen = []
    out = translate_srt(raw, lambda lines: seen.extend(lines) or [line.upper() for line in lines],
                        lambda source, target: [(i, i) for i in range(len(source.split()))])
    assert out.startswith("\ufeff1\r\n") and out.count("\r\n") == raw.count("\r\n")
    english, french = list(srt.parse(text)), list(srt.parse(out.removeprefix("\ufeff")))
    assert [(c.index, c.start, c.end) for c in french] == [(c.index, c.start, c.end) for c in english]
    by_number = {cue.index: cue.content.replace("\r\n", "\n") for cue in french}
    assert by_number[2] == "{\\an8}NORTH STATION, 1954"  # a sign, not joined to the voice after it
    assert by_number[4] == "- IS THIS SEAT FREE?\n- YES, PLEASE SIT DOWN."
    assert by_number[7] == '<i><font color="#00ffff">WHERE ARE YOU GOING, SIR?</font></i>'
    assert by_number[13] == "{\\an8}<i>(WHISPERING) DON'T TELL ANYONE.</i>"
    assert by_number[14] == "YOU SAID <i>NOTHING</i> TO HER?"  # a tag inside: around its aligned word
    assert "Is this seat free? Yes, please sit down." in seen and not any("<" in line or "{" in line for line in seen)
    assert "You said nothing to her?" in seen
    assert "I was hoping that somebody would come tonight before the snow closes the road." in seen


def test_nmt_translate_writes_the_subtitles_in_french_with_every_timing_kept(tmp_path):
    out = tmp_path / "dialogue.fr.srt"
    done = subprocess.run([sys.executable, "-m", "nmt_cli.main", "translate", "-i", str(DIALOGUE), "-o", str(out),
                           "-q"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    english, french = list(srt.parse(DIALOGUE.read_text())), list(srt.parse(out.read_text()))
    assert [(c.index, c.start, c.end) for c in french] == [(c.index, c.start, c.end) for c in english]
    for source, target in zip(english, french, strict=True):
        assert target.content.strip() and target.content != source.content
        assert target.content.count("\n") == source.content.count("\n")
    assert french[3].content.startswith("<i>") and french[3].content.endswith("</i>")
    bad = subprocess.run([sys.executable, "-m", "nmt_cli.main", "translate", "--input-format", "srt", "-q"],
                         input="this is not\na subtitle file\n", capture_output=True, text=True)
    assert bad.returncode == 2 and bad.stderr.startswith("error: not a SubRip (.srt) file")
