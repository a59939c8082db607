"""`nmt translate` end to end: one output line per input line, in order, whatever the input."""

from __future__ import annotations

import io
import json
import multiprocessing
import os
import subprocess
import sys
import time

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nmt.checkpoint import load_checkpoint
from nmt.corpus import load_embedded
from nmt.errors import NmtError
from nmt.search import SearchOptions
from nmt.translate import Translator, translate_stream

NMT = [sys.executable, "-m", "nmt_cli.main", "translate"]


def run(args, stdin: bytes, env=None):
    return subprocess.run(NMT + args, input=stdin, capture_output=True, env={**os.environ, **(env or {})})


@pytest.fixture(scope="module")
def translator(tiny_checkpoint):
    return Translator.from_checkpoint(load_checkpoint(tiny_checkpoint), SearchOptions(beam_size=2, max_len_a=1.0,
                                                                                       max_len_b=5))


def stream(translator, data: bytes, **kwargs) -> list[str]:
    sink = io.StringIO()
    translate_stream(translator, io.BytesIO(data), sink, quiet=True, **kwargs)
    return sink.getvalue().split("\n")[:-1]


def test_cli_translates_stdin_line_by_line_in_order(tiny_checkpoint, translator):
    lines = ["A dog runs in the park.", "", "Two men are talking.", "   ", "A girl."]
    result = run(["--model", str(tiny_checkpoint), "--quiet"], "\n".join(lines).encode())
    assert result.returncode == 0, result.stderr
    out = result.stdout.decode().split("\n")
    assert out[-1] == "" and len(out) - 1 == len(lines)
    assert out[1] == "" and out[3] == ""
    # each line translated alone gives the same text: order and batching change nothing
    assert out[:-1] == [translator.translate([line])[0].text for line in lines]


def test_cli_jsonl_nbest_and_usage_errors(tiny_checkpoint):
    result = run(["--model", str(tiny_checkpoint), "--format", "jsonl", "--nbest", "2", "-q"], b"A dog.\n")
    record = json.loads(result.stdout.decode())
    assert record["source"] == "A dog." and len(record["nbest"]) == 2
    assert record["translation"] == record["nbest"][0]["translation"]
    assert record["score"] >= record["nbest"][1]["score"]
    bad = run(["--model", str(tiny_checkpoint), "--nbest", "2"], b"A dog.\n")
    assert bad.returncode == 2 and bad.stderr.decode().startswith("error: ")
    no_workers = run(["--model", str(tiny_checkpoint), "--workers", "0"], b"A dog.\n")
    assert no_workers.returncode == 2 and no_workers.stderr.decode() == "error: --workers must be at least 1\n"


def test_workers_search_batches_at_once_in_forked_processes_with_the_same_output(tiny_checkpoint, translator,
                                                                                  tmp_path):
    lines = load_embedded("multi30k", "valid").source[:24]
    parallel = Translator.from_checkpoint(load_checkpoint(tiny_checkpoint), translator.options, batch_size=3,
                                          workers=2)
    searched_on = tmp_path / "searched_on"  # a line (process, torch threads) per batch, from the workers
    search_batch = parallel._search_batch

    def spy(sources):
        with searched_on.open("a") as log:
            log.write(f"{os.getpid()} {torch.get_num_threads()}\n")
        time.sleep(0.05)  # long enough that the first worker cannot take every batch before the second starts
        return search_batch(sources)

    parallel._search_batch = spy
    threads = torch.get_num_threads()
    assert [t.text for t in parallel.translate(lines)] == [t.text for t in translator.translate(lines)]
    batches = [line.split() for line in searched_on.read_text().splitlines()]
    assert len(batches) == 8 and len({pid for pid, _ in batches}) == 2
    assert str(os.getpid()) not in {pid for pid, _ in batches}
    assert {int(count) for _, count in batches} == {1}  # one thread each
    assert torch.get_num_threads() == threads and not multiprocessing.active_children()  # workers gone

    def failing(sources):
        raise ValueError("a batch failed")

    parallel._search_batch = failing
    with pytest.raises(ValueError, match="a batch failed"):  # a worker's error reaches the caller
        parallel.translate(lines)
    assert not multiprocessing.active_children()


def test_a_worker_that_dies_ends_the_translation_with_an_error_not_a_hang(tiny_checkpoint, translator):
    parallel = Translator.from_checkpoint(load_checkpoint(tiny_checkpoint), translator.options, batch_size=3,
                                          workers=2)
    parallel._search_batch = lambda sources: os._exit(3)  # as a worker killed by the OOM killer
    with pytest.raises(NmtError, match="worker process died"):
        parallel.translate(load_embedded("multi30k", "valid").source[:12])
    assert not multiprocessing.active_children()


def test_missing_model_is_one_line_exit_2(tmp_path):
    result = run([], b"A dog.\n", env={"NMT_MODEL": str(tmp_path / "none.pt")})
    assert result.returncode == 2
    assert result.stderr.decode().count("\n") == 1 and "not found" in result.stderr.decode()


def test_crlf_missing_final_newline_and_invalid_utf8(tiny_checkpoint, translator):
    data = b"A dog.\r\nA cat\xff\xfe runs.\nlast line without newline"
    result = run(["--model", str(tiny_checkpoint)], data)
    assert result.returncode == 0
    assert len(result.stdout.decode().split("\n")) - 1 == 3
    assert result.stderr.decode().count("invalid UTF-8") == 1
    assert stream(translator, b"A dog.\r\n")[0] == translator.translate(["A dog."])[0].text


def test_long_line_is_translated_in_pieces_with_one_warning(tiny_checkpoint):
    long_line = " ".join(["A man rides a bike down the street."] * 20)  # far past 63 source tokens
    result = run(["--model", str(tiny_checkpoint)], (long_line + "\n" + long_line + "\n").encode())
    assert result.returncode == 0
    assert len(result.stdout.decode().split("\n")) - 1 == 2
    assert result.stderr.decode().count("translated in pieces") == 1


def test_closed_stdout_ends_quietly(tiny_checkpoint):
    lines = b"A dog runs.\n" * 3000
    pipeline = subprocess.run(
        " ".join(NMT + ["--model", str(tiny_checkpoint), "--beam", "1"]) + " | head -1",
        shell=True, input=lines, capture_output=True, executable="/bin/bash",
    )
    assert pipeline.returncode == 0
    assert pipeline.stdout.count(b"\n") == 1
    assert b"Traceback" not in pipeline.stderr and b"Error" not in pipeline.stderr


BAD_LINES = ["", "   ", "\t\t", "😀🚀", "日本語の文です。", "שלום עולם", "مرحبا بالعالم", "\x00\x07", "\u2028x"]
weird_text = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\n"), max_size=40
) | st.sampled_from(BAD_LINES)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lines=st.lists(weird_text, min_size=1, max_size=8), window=st.sampled_from([1, 3, 1000]))
def test_n_lines_in_n_lines_out(translator, lines, window):
    out = stream(translator, "\n".join(lines).encode() + b"\n", window=window)
    assert len(out) == len(lines)
    for line, translation in zip(lines, out, strict=True):
        if not line.strip():
            assert translation == ""


@settings(max_examples=10, deadline=None)
@given(data=st.binary(max_size=60))
def test_arbitrary_bytes_never_lose_a_line(translator, data):
    out = stream(translator, data)
    assert len(out) == data.count(b"\n") + (0 if data.endswith(b"\n") or not data else 1)
