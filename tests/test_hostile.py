"""Hostile and malformed files (issue 66): each refused, or passed through where it cannot be parsed, with one
line and the documented exit code, in bounded memory and time, leaving no file behind; the server too."""

from __future__ import annotations

import io
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest

from nmt.apps.files import FileLimits, FileRefused, translate_file
from nmt.apps.subtitles import translate_srt

docx = pytest.importorskip("docx")

NMT = [sys.executable, "-m", "nmt_cli.main"]
PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 8


def same(texts: list[str]) -> list[str]:
    return list(texts)


def no_alignment(source: str, target: str) -> list[tuple[int, int]]:
    return []


def word_document(xml: bytes | None = None, inflated: int = 0) -> bytes:
    """A real .docx (python-docx's), with its document part replaced by `xml`, or by a paragraph of
    `inflated` bytes of one letter written straight into the zip (a bomb: it compresses a thousand times)."""
    made = io.BytesIO()
    document = docx.Document()
    document.add_paragraph("A dog runs in the park.")
    document.save(made)
    out = io.BytesIO()
    with zipfile.ZipFile(made) as source, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as target:
        for member in source.infolist():
            if member.filename != "word/document.xml" or (xml is None and not inflated):
                target.writestr(member, source.read(member))
            elif xml is not None:
                target.writestr(member.filename, xml)
            else:
                with target.open(member.filename, "w", force_zip64=True) as part:
                    part.write(b'<?xml version="1.0"?><w:document xmlns:w="http://schemas.openxmlformats.org/'
                               b'wordprocessingml/2006/main"><w:body><w:p><w:r><w:t>')
                    chunk = b"a" * 2**20
                    for _ in range(inflated // len(chunk)):
                        part.write(chunk)
                    part.write(b"</w:t></w:r></w:p></w:body></w:document>")
    return out.getvalue()


LAUGHS = (b'<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;">'
          b'<!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;">]><w:document xmlns:w="http://schemas.openxmlformats.org/'
          b'wordprocessingml/2006/main"><w:body><w:p><w:r><w:t>&lol3;</w:t></w:r></w:p></w:body></w:document>')


@pytest.mark.parametrize("name, data, message", [
    ("bomb.docx", lambda: word_document(inflated=300 * 2**20), "inflate to more than 268,435,456 bytes"),
    ("ratio.docx", lambda: word_document(inflated=40 * 2**20), "inflates 1,0"),  # a thousand times and more
    ("laughs.docx", lambda: word_document(LAUGHS), "declares XML entities"),
    ("cut.docx", lambda: word_document()[:3000], "not a readable zip"),
    ("page.html", lambda: b"<html><body>" + b"<b>" * 200_000 + b"A dog." + b"</b>" * 200_000, "nests deeper than 256"),
    ("photo.html", lambda: PNG, "binary data"),
    ("report.docx.srt", lambda: word_document(), "binary data"),  # the wrong extension
    ("huge.srt", lambda: b"1\n00:00:01,000 --> 00:00:02,000\n" + b"A dog runs. " * 500_000 + b"\n",
     "more than 5,000,000 characters"),
])
def test_a_hostile_file_is_one_line_and_exit_2_in_bounded_memory_and_time_leaving_nothing(
        tiny_checkpoint, tmp_path, name, data, message):
    source, output = tmp_path / name, tmp_path / f"out{Path(name).suffix}"
    source.write_bytes(data())
    started = time.monotonic()
    result, peak_kib = measured(NMT + ["translate", "--model", str(tiny_checkpoint), "-i", str(source), "-o",
                                       str(output)], tmp_path / "peak")
    seconds = time.monotonic() - started
    assert result.returncode == 2, result.stderr[-2000:]
    assert result.stderr.count("\n") == 1 and message in result.stderr, result.stderr
    assert "please report" not in result.stderr
    assert sorted(path.name for path in tmp_path.iterdir()) == sorted([name, "peak"])  # no output, no .partial
    assert peak_kib < 1024 * 1024  # under 1 GiB
    assert seconds < 60  # generous: the work is a scan; the import of torch is most of it


def measured(command: list[str], peak: Path) -> tuple[subprocess.CompletedProcess, int]:
    """`command`'s result and its peak memory in KiB, through a wrapper process of its own (whose children's
    ru_maxrss is that command's alone, not the largest of every process this test run started)."""
    wrapper = ("import resource, subprocess, sys; code = subprocess.call(sys.argv[2:]); "
               "open(sys.argv[1], 'w').write(str(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)); "
               "sys.exit(code)")
    result = subprocess.run([sys.executable, "-c", wrapper, str(peak), *command], capture_output=True, text=True,
                            timeout=120)
    return result, int(peak.read_text())


def test_a_picture_given_as_text_is_refused_before_the_model_loads(tiny_checkpoint, tmp_path):
    picture = tmp_path / "photo.png"
    picture.write_bytes(PNG)
    result = subprocess.run(NMT + ["translate", "--model", str(tiny_checkpoint), "-i", str(picture)],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr == f"error: {picture} is not a text file: it holds binary data (a picture, an archive?)\n"


def test_limits_count_every_kind_of_file_and_name_the_option_that_raises_them():
    limits = FileLimits(max_chars=20, max_depth=3)
    too_many = r"more than 20 characters to translate \(--max-file-chars raises the limit\)"
    with pytest.raises(FileRefused, match=too_many) as refused:
        translate_file("txt", b"A dog runs.\nA cat sleeps on the mat.\n", same, no_alignment, limits)
    assert refused.value.limit == "max_chars"
    with pytest.raises(FileRefused, match=r"nests deeper than 3 elements \(--max-file-depth raises the limit\)"):
        translate_file("html", b"<div><p><b><i>A dog.</i></b></p></div>", same, no_alignment, limits)
    # void and self-closing elements do not nest
    assert translate_file("html", b"<div><p>A<br>dog<img src=x><b/>.</p></div>", same, no_alignment, limits)


MALFORMED = ("1\n00:00:01,000 --> 00:00:02,000\nHello\n\n"
             "2\nnot a timing\nA dog\n\n"
             "3\n99:99:99,999 --> 100:00:00,000\nThe cat sleeps on the mat\nin the sun.\n")


def test_a_malformed_subtitle_block_is_kept_byte_for_byte_and_timings_are_never_rewritten():
    seen = []

    def translate(texts):
        seen.extend(texts)
        return [text.upper() for text in texts]

    translated = translate_srt(MALFORMED, translate)
    assert seen == ["Hello", "The cat sleeps on the mat in the sun."]  # not joined over the block between
    blocks = translated.split("\n\n")
    assert blocks[0] == "1\n00:00:01,000 --> 00:00:02,000\nHELLO"  # a one-word cue: one cue, its own word
    assert blocks[1] == "2\nnot a timing\nA dog"  # not number, timing, text: as it was
    assert blocks[2].startswith("3\n99:99:99,999 --> 100:00:00,000\n") and "IN THE SUN." in blocks[2]
    assert translated.endswith("\n") and translated.count("\n") == MALFORMED.count("\n")


def test_a_sentence_translated_shorter_than_its_cues_is_translated_cue_by_cue():
    two = "1\n00:00:01,000 --> 00:00:02,000\nHello\n\n2\n00:00:02,000 --> 00:00:03,000\nmy friend.\n"
    seen = []

    def translate(texts):
        seen.extend(texts)
        return ["Salut!" if text == "Hello my friend." else text.upper() for text in texts]

    translated = translate_srt(two, translate)
    assert seen == ["Hello my friend.", "Hello", "my friend."]  # one word for two cues: each alone instead
    assert "..." not in translated and "HELLO" in translated and "MY FRIEND." in translated


@pytest.mark.slow  # a server and a file job
def test_the_server_refuses_a_bomb_with_413_stays_responsive_and_stops_on_sigterm_mid_job(tiny_checkpoint, tmp_path):
    from tests.test_serve import Server

    httpx = pytest.importorskip("httpx")
    server = Server(tiny_checkpoint, "--drain-timeout", "2", "--max-batch-lines", "4")
    try:
        bomb = word_document(inflated=100 * 2**20)
        refused = server.post("/translate_file", files={"file": ("bomb.docx", bomb)})
        assert refused.status_code == 413 and "--max-file-inflated" in refused.json()["error"]
        assert server.post("/translate", json={"q": "A dog.", "source": "en", "target": "fr"}).status_code == 200
        long = tmp_path / "long.txt"  # a long job, 300k characters
        long.write_text(("A dog runs in the park with a ball. " * 3 + "\n") * 3000)
        client = subprocess.Popen([sys.executable, "-c", (
            "import httpx, sys; httpx.post(sys.argv[1] + '/translate_file', timeout=300, "
            "files={'file': ('long.txt', open(sys.argv[2], 'rb'))})"), server.url, str(long)])
        time.sleep(3)  # the job is under way
        assert httpx.get(server.url + "/health", timeout=10).status_code == 200  # others are still answered
        started = time.monotonic()
        code = server.stop()
        assert time.monotonic() - started < 2 + 15  # --drain-timeout, and a few seconds for a batch to end
        assert code == 0
        assert "Traceback" not in server.process.stderr.read().decode()
        client.kill()
    finally:
        if server.process.poll() is None:
            server.process.kill()

