"""Text in the encodings users have: UTF-16 with and without a mark, Latin-1 and Windows-1252 files, a page that
declares its charset, CRLF line ends, and random bytes refused (nmt.apps.encodings, nmt.apps.files, nmt translate)."""

from __future__ import annotations

import os
import random
import subprocess
import sys

import pytest

from nmt.apps.encodings import NotText, decoded, sniff
from nmt.apps.files import FileRefused, translate_file
from nmt.errors import UsageError

NMT = [sys.executable, "-m", "nmt_cli.main", "translate"]
TEXT = "The café is open.\nA good résumé, naïve “quotes”.\n"


def upper(texts: list[str]) -> list[str]:
    """A stand-in model: what it was given, in capitals (the accents must have arrived as letters)."""
    return [text.upper() for text in texts]


def no_alignment(source: str, target: str) -> list[tuple[int, int]]:
    return []


@pytest.mark.parametrize("encoding, how", [("utf-8", "UTF-8"), ("utf-8-sig", "a byte order mark"),
                                           ("utf-16", "a byte order mark"), ("utf-16-le", "its zero bytes (UTF-16)"),
                                           ("utf-16-be", "its zero bytes (UTF-16)"),
                                           ("cp1252", "its bytes, which are not UTF-8")])
def test_the_encoding_is_found_and_the_text_read_as_written(encoding, how):
    data = TEXT.encode(encoding)
    found, said = sniff(data)
    assert said == how
    assert decoded(data, "txt") == TEXT
    assert translate_file("txt", data, upper, no_alignment).decode("utf-8") == TEXT.upper()


def test_latin1_said_with_encoding_and_a_page_s_own_declaration_changed_to_utf8():
    latin = "Über café".encode("latin-1")
    assert decoded(latin, "txt", "latin-1") == "Über café"
    with pytest.raises(UsageError, match="no such encoding"):
        sniff(latin, "txt", "klingon")
    page = ('<html><head><meta http-equiv="Content-Type" content="text/html; charset=iso-8859-1">'
            "<title>Le café</title></head><body><p>The café is open.</p></body></html>").encode("latin-1")
    out = translate_file("html", page, upper, no_alignment).decode("utf-8")
    assert "charset=utf-8" in out and "iso-8859-1" not in out
    assert "THE CAFÉ IS OPEN." in out


def test_utf8_with_one_stray_byte_stays_utf8_and_a_sequence_cut_at_the_head_s_end_is_no_sign():
    assert sniff("naïve \xff".encode() + b"\xff")[0] == "utf-8"  # real UTF-8 in it: the stray byte is replaced
    assert sniff(b"plain text " * 100 + "é".encode()[:1])[0] == "utf-8"


def test_random_bytes_are_refused_as_no_text():
    noise = random.Random(0).randbytes(8192)
    with pytest.raises(NotText):
        sniff(noise)
    with pytest.raises(FileRefused, match="binary data"):
        translate_file("txt", noise, upper, no_alignment)


def test_subtitles_and_markdown_keep_their_crlf_and_add_no_line():
    srt = ("1\r\n00:00:01,000 --> 00:00:02,000\r\nThe café is open.\r\n\r\n"
           "2\r\n00:00:03,000 --> 00:00:04,000\r\nBye.\r\n")
    out = translate_file("srt", srt.encode("cp1252"), upper, no_alignment).decode("utf-8")
    assert out.count("\r\n") == srt.count("\r\n") and out.count("\n") == srt.count("\n")
    assert "THE CAFÉ IS OPEN.\r\n" in out
    markdown = "# Title\r\n\r\nThe house is red.\r\n\r\n- one\r\n- two\r\n"
    out = translate_file("md", markdown.encode(), upper, no_alignment).decode("utf-8")
    assert out == markdown.upper()


def test_the_cli_reads_utf16_and_latin1_keeps_crlf_and_refuses_random_bytes(tiny_checkpoint, tmp_path):
    lines = "A dog runs in the park.\r\nThe café is open.\r\n"
    reference = subprocess.run(NMT + ["--model", str(tiny_checkpoint), "-q"], input=lines.encode(),
                               capture_output=True)
    assert reference.returncode == 0 and reference.stdout.count(b"\r\n") == 2  # CRLF in, CRLF out
    utf16 = tmp_path / "utf16.txt"
    utf16.write_bytes(lines.encode("utf-16"))
    latin = tmp_path / "latin.txt"
    latin.write_bytes(lines.encode("latin-1"))
    for path in (utf16, latin):
        done = subprocess.run(NMT + ["--model", str(tiny_checkpoint), "-i", str(path)], capture_output=True)
        assert done.returncode == 0 and done.stdout == reference.stdout, done.stderr
    assert b"Windows-1252" in done.stderr  # the Latin-1 file: read, and said so
    noise = tmp_path / "noise.txt"
    noise.write_bytes(os.urandom(4096))
    refused = subprocess.run(NMT + ["--model", str(tiny_checkpoint), "-i", str(noise)], capture_output=True,
                             text=True)
    assert refused.returncode == 2 and refused.stdout == ""
    assert refused.stderr.count("\n") == 1 and "not a text file" in refused.stderr
