"""`nmt translate` end to end: one output line per input line, in order, whatever the input."""

from __future__ import annotations

import dataclasses
import io
import json
import logging
import multiprocessing
import os
import re
import shlex
import signal
import subprocess
import sys
import time

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nmt.data.corpus import load_embedded
from nmt.decoding.configuration import DecodingConfig, DecodingFlags, search_options
from nmt.decoding.search import Hypothesis, SearchOptions
from nmt.decoding.streams import translate_document, translate_stream
from nmt.decoding.translate import Translator
from nmt.errors import Interrupted, NmtError, UsageError
from nmt.model.checkpoint import load_checkpoint
from tests.conftest import decoding

NMT = [sys.executable, "-m", "nmt_cli.main", "translate"]


def run(args, stdin: bytes, env=None):
    return subprocess.run(NMT + args, input=stdin, capture_output=True, env={**os.environ, **(env or {})})


@pytest.fixture(scope="module")
def translator(tiny_checkpoint):
    checkpoint = load_checkpoint(tiny_checkpoint)
    return Translator.from_checkpoint(checkpoint, decoding(checkpoint, SearchOptions(beam_size=2, max_len_a=1.0,
                                                                                     max_len_b=5)))


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
    checkpoint = load_checkpoint(tiny_checkpoint)
    parallel = Translator.from_checkpoint(checkpoint, decoding(checkpoint, translator.options, batch_size=3,
                                                               workers=2))
    searched_on = tmp_path / "searched_on"  # a line (process, torch threads) per batch, from the workers
    search_batch = parallel._search_batch

    def spy(*batch):
        with searched_on.open("a") as log:
            log.write(f"{os.getpid()} {torch.get_num_threads()}\n")
        time.sleep(0.05)  # long enough that the first worker cannot take every batch before the second starts
        return search_batch(*batch)

    parallel._search_batch = spy
    threads = torch.get_num_threads()
    assert [t.text for t in parallel.translate(lines)] == [t.text for t in translator.translate(lines)]
    batches = [line.split() for line in searched_on.read_text().splitlines()]
    assert len(batches) == 8 and len({pid for pid, _ in batches}) == 2
    assert str(os.getpid()) not in {pid for pid, _ in batches}
    assert {int(count) for _, count in batches} == {1}  # one thread each
    assert torch.get_num_threads() == threads and not multiprocessing.active_children()  # workers gone

    def failing(*batch):
        raise ValueError("a batch failed")

    parallel._search_batch = failing
    with pytest.raises(ValueError, match="a batch failed"):  # a worker's error reaches the caller
        parallel.translate(lines)
    assert not multiprocessing.active_children()


def test_a_worker_that_dies_ends_the_translation_with_an_error_not_a_hang(tiny_checkpoint, translator):
    checkpoint = load_checkpoint(tiny_checkpoint)
    parallel = Translator.from_checkpoint(checkpoint, decoding(checkpoint, translator.options, batch_size=3,
                                                               workers=2))
    parallel._search_batch = lambda *batch: os._exit(3)  # as a worker killed by the OOM killer
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
    long_sentence = ", ".join(["a man rides a bike down the street"] * 20) + "."  # far past 63 source tokens
    result = run(["--model", str(tiny_checkpoint)], (long_sentence + "\n" + long_sentence + "\n").encode())
    assert result.returncode == 0
    assert len(result.stdout.decode().split("\n")) - 1 == 2
    assert result.stderr.decode().count("translated in pieces") == 1


def test_a_line_is_translated_a_sentence_at_a_time_in_pieces_of_bounded_length(translator):
    line = "A dog runs in the park. Two men are talking!"
    assert translator.translate([line])[0].text == " ".join(
        translator.translate([sentence])[0].text for sentence in ("A dog runs in the park.", "Two men are talking!"))
    hostile = " ".join(["word"] * 3000) + ". " + ", ".join(["a man rides a bike"] * 500)
    pieces = [piece for unit in translator._units(hostile) for piece in unit.pieces]
    assert all(0 < len(piece) <= translator.max_piece_tokens for piece in pieces)
    assert " ".join(map(translator.tokenizer.decode, pieces)).split() == hostile.split()  # no word lost


def test_even_an_untrained_model_cannot_garble_a_link_an_address_a_code_or_a_number(translator):
    assert translator.tokenizer.has_placeholders
    line = "Write to help@example.org or see https://example.com/faq?x=1 about AF1234, $1,249.99 and 🎉."
    text = translator.translate([line])[0].text
    for entity in ("help@example.org", "https://example.com/faq?x=1", "AF1234", "1\u202f249,99\u00a0$", "🎉"):
        assert text.count(entity) == 1, text  # the amount as French writes it (nmt.text.conventions)
    loose = Translator(translator.model, translator.tokenizer, DecodingConfig.plain(translator.options,
                                                                                 ordinary_input=False))
    assert "https://example.com/faq?x=1" not in loose.translate([line])[0].text  # the model alone garbles it


def test_a_line_in_another_script_comes_back_as_written_and_costs_the_engine_nothing(translator):
    chinese = "你好，世界。我们今天去公园。" * 500  # 7,000 characters, 21,000 tokens of bytes
    kept = translator.translate([chinese, "Привет, как дела?"])
    assert [t.text for t in kept] == [chinese, "Привет, как дела?"] and all(t.flags == ["copy"] for t in kept)
    assert translator.cost(chinese) == 1 and len(translator.tokenizer.encode(chinese)) > 10_000
    mixed = translator.translate(["Tokyo (東京) is big."])[0].text
    assert mixed.count("東京") == 1  # behind a placeholder: even an untrained model keeps it
    assert translator.cost("Tokyo (東京) is big.") < len(translator.tokenizer.encode("Tokyo (東京) is big."))
    assert translator.cost("🎉 " * 5_000) <= 3  # one run between spaces: one placeholder
    scattered = "🎉 and " * 20  # more runs than placeholders: the model reads those past them as they are
    assert translator.cost(scattered) == len(translator.tokenizer.encode(scattered))


def test_no_protect_translates_the_text_as_it_is(tiny_checkpoint, translator):
    line = b"SEE HTTPS://EXAMPLE.COM/FAQ NOW.\n"
    as_is = Translator(translator.model, translator.tokenizer, DecodingConfig.plain(translator.options,
                                                                                 ordinary_input=False))
    result = run(["--model", str(tiny_checkpoint), "--no-protect"], line)
    assert result.stdout.decode() == as_is.translate([line.decode().strip()])[0].text + "\n"
    assert run(["--model", str(tiny_checkpoint)], line).stdout.decode().count("HTTPS://EXAMPLE.COM/FAQ") == 1


def test_capitals_are_translated_in_sentence_case_and_put_back(translator):
    shouted = translator.translate(["A DOG RUNS IN THE PARK."])[0].text
    assert shouted == translator.translate(["A dog runs in the park."])[0].text.upper()


def test_sampling_repeats_with_its_seed_and_refuses_bad_settings(tiny_checkpoint, translator):
    lines = ["A dog runs in the park.", "Two men are talking.", "A woman reads."]

    def sampled(seed: int) -> list:
        options = SearchOptions(beam_size=1, top_k=20, nbest=3, seed=seed, max_len_a=1.0, max_len_b=5)
        sampler = Translator(translator.model, translator.tokenizer, DecodingConfig.plain(options))
        return [t.nbest for t in sampler.translate(lines)]

    assert sampled(3) == sampled(3) != sampled(4) and all(len(nbest) == 3 for nbest in sampled(3))
    checkpoint = load_checkpoint(tiny_checkpoint)
    assert search_options(checkpoint, DecodingFlags(nbest=3, sampling="topp:0.9", temperature=0.7, seed=2)) == \
        SearchOptions(beam_size=1, top_p=0.9, temperature=0.7, seed=2, nbest=3, max_len_a=1.0, max_len_b=5)
    for bad in (dict(sampling="topk:0"), dict(sampling="top5"), dict(sampling="topk:5", beam=4), dict(seed=1)):
        with pytest.raises(UsageError):
            search_options(checkpoint, DecodingFlags(**bad))
    result = run(["--model", str(tiny_checkpoint), "--exact", "--sampling", "topk:20", "--seed", "3", "--format",
                  "jsonl", "--nbest", "3"], "\n".join(lines).encode() + b"\n")
    assert [[(n["translation"], pytest.approx(n["score"], abs=1e-5)) for n in json.loads(line)["nbest"]]
            for line in result.stdout.decode().splitlines()] == [[tuple(n) for n in nbest] for nbest in sampled(3)]


def test_jsonl_input_prefixes_start_their_translations(tiny_checkpoint, translator):
    sources = ["A dog runs in the park.", "Two men talk.", "", "A cat. A bird."]
    prefixes = ["Un chien", None, "Rien", "Le chat"]
    for beam in (1, 3):
        options = SearchOptions(beam_size=beam, max_len_a=1.0, max_len_b=5)
        prefixed = Translator(translator.model, translator.tokenizer, DecodingConfig.plain(options))
        lines = [t.text for t in prefixed.translate(sources, prefixes)]
        assert lines[0].startswith("Un chien") and lines[3].startswith("Le chat") and lines[2] == ""
        assert lines[1] == prefixed.translate([sources[1]])[0].text
    records = [{"source": source, "prefix": prefix} for source, prefix in zip(sources, prefixes, strict=True)]
    data = "".join(json.dumps(record) + "\n" for record in records).encode()
    result = run(["--model", str(tiny_checkpoint), "--input-format", "jsonl"], data)
    assert result.stdout.decode().split("\n")[:-1] == [t.text for t in translator.translate(sources, prefixes)]
    bad = run(["--model", str(tiny_checkpoint), "--input-format", "jsonl"], b'{"source": "A dog."}\nA dog.\n')
    assert bad.returncode == 2 and bad.stderr.decode() == "error: input line 2: not a JSON object with a source\n"


def test_a_document_keeps_its_paragraphs_and_blank_lines(tiny_checkpoint, translator):
    text = "A dog runs in the\npark. Two men talk.\n\n\nA woman reads\r\na book.\n"
    french = translate_document(translator, text)
    assert french.split("\n") == [translator.translate(["A dog runs in the park. Two men talk."])[0].text, "", "",
                                  translator.translate(["A woman reads a book."])[0].text, ""]
    assert translate_document(translator, "\n\nA dog.") == "\n\n" + translator.translate(["A dog."])[0].text + "\n"
    result = run(["--model", str(tiny_checkpoint), "--document"], text.encode())
    assert result.returncode == 0 and result.stdout.decode() == french
    refused = run(["--model", str(tiny_checkpoint), "--document", "--format", "jsonl"], text.encode())
    assert refused.returncode == 2


def test_confidence_flags_and_the_confidence_floor(tiny_checkpoint, translator):
    capped = Translator(translator.model, translator.tokenizer,
                        DecodingConfig.plain(SearchOptions(beam_size=2, max_len_a=0.0, max_len_b=3)))
    result = capped.translate(["A dog runs in the park."])[0]
    assert "max_length" in result.flags and result.confidence == pytest.approx(result.score)  # lenpen 1: the same
    hypothesis = Hypothesis(tokens=[5], score=-1.0, log_prob=-2.0)
    assert translator._flags("Tom!", "tom", [hypothesis], [[5, 6, 7]], [], 0.0) == ["copy"]
    assert translator._flags("A dog.", "de la de la de la de la de la", [hypothesis], [[5, 6, 7]], [], 0.0) == ["loop"]
    assert translator._flags("A dog.", " ", [hypothesis], [[5, 6, 7]], [], 0.0) == ["empty"]
    # a user's reasons to check a translation (nmt.text.flags), each with what it is about
    assert translator._flags("Run the tests at 10:30.", "Run les tests.", [hypothesis], [[5, 6, 7]], [], -5.0) == [
        "untranslated: Run", "number lost: 1030", "low confidence: -5.00 < -0.54"]
    # a date in digits that may be month or day first (a French reader reads it day first); one whose day shows
    # it went to the model day first, its numbers kept
    assert translator._flags("On 05/12/2024.", "Le 05/12/2024.", [hypothesis], [[5, 6, 7]], [], 0.0) == [
        "date order unknown: 05/12/2024"]
    assert translator._flags("On 12/25/2024.", "Le 25/12/2024.", [hypothesis], [[5, 6, 7]], [], 0.0) == []
    lines = b"A dog runs.\n\nTwo men talk.\n"
    floor = run(["--model", str(tiny_checkpoint), "--min-confidence", "0", "-q"], lines)
    assert floor.returncode == 0 and floor.stdout == b"\n\n\n"  # log-probabilities are below 0: all withheld
    assert floor.stderr.decode().startswith("2 translations below --min-confidence 0 were left empty")


def test_closed_stdout_ends_quietly(tiny_checkpoint):
    lines = b"A dog runs.\n" * 3000
    pipeline = subprocess.run(
        " ".join(NMT + ["--model", str(tiny_checkpoint), "--beam", "1"]) + ' | head -1; echo "${PIPESTATUS[0]}" >&2',
        shell=True, input=lines, capture_output=True, executable="/bin/bash",
    )
    assert pipeline.stdout.count(b"\n") == 1
    assert pipeline.stderr == b"0\n"  # nmt's own exit status, and nothing else on stderr


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


# ---- the line contract through the CLI, in every mode ------------------------------------------------------


@pytest.fixture(scope="module")
def shortlisted_checkpoint(tiny_checkpoint, tmp_path_factory):
    import dataclasses

    from nmt.model.checkpoint import save_checkpoint
    from nmt.model.shortlist import shortlist_from_text

    checkpoint = load_checkpoint(tiny_checkpoint)
    pairs = load_embedded("multi30k", "valid")
    shortlist = shortlist_from_text(checkpoint.tokenizer(), pairs.source, pairs.target, checkpoint.config.vocab_size,
                                    5, 50)
    path = tmp_path_factory.mktemp("shortlisted") / "tiny.pt"
    save_checkpoint(path, dataclasses.replace(checkpoint, shortlist=shortlist))
    return path


MODES = {  # name -> extra options of `nmt translate`
    "default": [],  # the fast path: int8 weights on an x86 CPU
    "exact": ["--exact"],
    "greedy": ["--beam", "1"],
    "jsonl": ["--beam", "3", "--format", "jsonl", "--nbest", "2"],
    "workers": ["--exact", "--workers", "2", "--batch-size", "1"],
    "no-cache": ["--no-cache", "--beam", "1"],
    "bf16": ["--precision", "bf16"],
    "int8_fp32": ["--precision", "int8_fp32"],
    "int8_bf16 shortlist": ["--precision", "int8_bf16", "--shortlist"],
    "interactive": ["--exact", "--interactive"],
    "files": ["--exact", "--input", "INPUT", "--output", "OUTPUT"],
}
blank = st.sampled_from(["", " ", "\t", "\r"])
lines_with_blank_windows = st.tuples(
    st.sampled_from([0, 1, 1000]),  # blank lines first: 1000 fill the first window of 1000 lines
    st.lists(st.one_of(blank, weird_text), max_size=6),
    st.booleans(),  # a final newline or not
)


def cli_translate(options: list[str], data: bytes, tmp_path) -> tuple[int, list[str]]:
    """`nmt translate` in this process (typer's CliRunner): its exit code and output lines."""
    from typer.testing import CliRunner

    from nmt_cli.main import app

    source, target = tmp_path / "in.en", tmp_path / "out.fr"
    options = [{"INPUT": str(source), "OUTPUT": str(target)}.get(option, option) for option in options]
    source.write_bytes(data)
    result = CliRunner().invoke(app, ["translate", "-q", *options], input=data)
    output = target.read_text() if "--output" in options else result.stdout
    assert "Traceback" not in result.stderr and result.exception is None, result.exception
    return result.exit_code, output.split("\n")[:-1]


@pytest.mark.parametrize("mode", MODES)
@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=lines_with_blank_windows)
def test_every_mode_writes_one_line_per_input_line_in_order(mode, case, shortlisted_checkpoint, translator,
                                                            tmp_path):
    leading_blanks, lines, final_newline = case
    data = "\n".join([""] * leading_blanks + lines).encode() + (b"\n" if final_newline else b"")
    lines = data.decode().split("\n")
    if lines[-1] == "":  # what follows the last newline is a line only if it is not empty
        lines.pop()
    code, out = cli_translate(["--model", str(shortlisted_checkpoint), *MODES[mode]], data, tmp_path)
    assert code == 0 and len(out) == len(lines)
    texts = [json.loads(record)["translation"] for record in out] if mode == "jsonl" else out
    for line, text in zip(lines, texts, strict=True):
        if not line.strip():
            assert text == ""
    if mode in ("exact", "files", "workers", "interactive"):  # the exact path: each as if translated alone
        assert texts == [translator.translate([line.removesuffix("\r")])[0].text for line in lines]


def test_interactive_answers_each_line_before_the_next_is_sent(tiny_checkpoint, translator):
    process = subprocess.Popen(NMT + ["--model", str(tiny_checkpoint), "--interactive", "-q"], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    for line in ["Hello.", "", "Good night.", "   ", ""]:
        process.stdin.write(line.encode() + b"\n")
        process.stdin.flush()
        assert process.stdout.readline().decode() == translator.translate([line])[0].text + "\n"
    process.stdin.close()
    assert process.wait(timeout=30) == 0 and process.stderr.read() == b""


def wait_for(condition, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def children(pid: int) -> list[int]:
    found = subprocess.run(["ps", "--ppid", str(pid), "-o", "pid="], capture_output=True, text=True).stdout
    return [int(child) for child in found.split()]


def test_sigterm_while_waiting_for_input_keeps_the_finished_lines_in_a_partial_file(tiny_checkpoint, tmp_path):
    output = tmp_path / "out.fr"
    partial = tmp_path / "out.fr.partial"
    process = subprocess.Popen(NMT + ["--model", str(tiny_checkpoint), "--interactive", "-o", str(output), "-q"],
                               stdin=subprocess.PIPE, stderr=subprocess.PIPE)  # -q: no progress line on a slow day
    process.stdin.write(b"A dog.\n\nTwo men.\n")
    process.stdin.flush()
    wait_for(lambda: partial.exists() and partial.read_text().count("\n") == 3)
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=30) == 143
    assert process.stderr.read().decode() == f"error: interrupted by SIGTERM after 3 lines (they are in {partial})\n"
    assert not output.exists() and partial.read_text().split("\n")[1] == ""


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_a_signal_stops_the_workers_and_flushes_the_lines_in_order(tiny_checkpoint, translator, tmp_path, stop):
    lines = [f"A dog number {number} runs." for number in range(3000)]
    source, output = tmp_path / "in.en", tmp_path / "out.fr"
    source.write_text("\n".join(lines) + "\n")
    with output.open("w") as sink:
        process = subprocess.Popen(NMT + ["--model", str(tiny_checkpoint), "-i", str(source), "--workers", "2",
                                          "--batch-size", "1", "-q"], stdout=sink, stderr=subprocess.PIPE)
        wait_for(lambda: len(children(process.pid)) == 2 or process.poll() is not None)
        workers = children(process.pid)
        process.send_signal(stop)
        assert process.wait(timeout=120) == 128 + stop  # generous: a loaded machine finishes its batch slowly
    written = output.read_text().split("\n")[:-1]
    name = "Ctrl-C" if stop == signal.SIGINT else stop.name
    assert process.stderr.read().decode() == f"error: interrupted by {name} after {len(written)} lines\n"
    assert written[:3] == [translation.text for translation in translator.translate(lines[:3])] or len(written) < 3
    assert len(workers) == 2 and not [pid for pid in workers if os.path.exists(f"/proc/{pid}")]


def test_an_interruption_mid_window_flushes_the_in_order_prefix(translator):
    from nmt.errors import Interrupted

    lines = ["A dog.", "Two men are talking in the street.", "A cat.", "A girl in a red coat."]
    as_ready, windows = translator.translate_as_ready, []

    def interrupted_in_the_second_window(chunk, prefixes=None):
        windows.append(chunk)
        for count, item in enumerate(as_ready(chunk, prefixes)):
            if len(windows) == 2 and count == 2:
                raise Interrupted(signal.SIGTERM)
            yield item

    translator.translate_as_ready = interrupted_in_the_second_window
    sink = io.StringIO()
    try:
        with pytest.raises(Interrupted) as stopped:
            translate_stream(translator, io.BytesIO("\n".join(lines * 3).encode()), sink, window=4, quiet=True)
    finally:
        del translator.translate_as_ready
    written = sink.getvalue().split("\n")[:-1]
    expected = [t.text for t in translator.translate(lines)] * 2
    assert 4 <= len(written) < 8 and written == expected[: len(written)]
    assert stopped.value.lines_written == len(written) and stopped.value.exit_code == 143


def test_output_is_written_whole_never_over_its_input_and_errors_are_one_line(tiny_checkpoint, tmp_path):
    source = tmp_path / "in.en"
    source.write_text("A dog.\n")
    same = run(["--model", str(tiny_checkpoint), "-i", str(source), "-o", str(source)], b"")
    assert same.returncode == 2 and same.stderr.decode().count("\n") == 1 and source.read_text() == "A dog.\n"
    output = tmp_path / "out.fr"
    assert run(["--model", str(tiny_checkpoint), "-i", str(source), "-o", str(output)], b"").returncode == 0
    assert output.read_text().count("\n") == 1 and not (tmp_path / "out.fr.partial").exists()
    full = run(["--model", str(tiny_checkpoint), "-o", "/dev/full"], b"A dog.\n")
    assert full.returncode == 2
    assert full.stderr.decode() == "error: cannot write /dev/full: No space left on device\n"
    to_full = subprocess.run(f"{shlex.join(NMT)} --model {shlex.quote(str(tiny_checkpoint))} > /dev/full", shell=True,
                             input=b"A dog.\n", capture_output=True)
    assert to_full.returncode == 2
    assert to_full.stderr.decode() == ("error: cannot write the translations to standard output: No space left on "
                                       "device\n")
    not_a_folder = tmp_path / "in.en" / "out.fr"  # named as given, not as the out.fr.partial nmt writes first
    refused = run(["--model", str(tiny_checkpoint), "-i", str(source), "-o", str(not_a_folder)], b"")
    assert refused.returncode == 2
    assert refused.stderr.decode() == f"error: cannot write {not_a_folder}: Not a directory\n"


@pytest.mark.slow
def test_closed_streams_an_ascii_locale_and_bad_threads_are_one_line_or_utf8(tiny_checkpoint):
    model = ["--model", str(tiny_checkpoint)]
    closed_in = subprocess.run(NMT + model, stdin=subprocess.DEVNULL, capture_output=True, close_fds=True,
                               preexec_fn=lambda: os.close(0))
    assert closed_in.returncode == 2 and closed_in.stderr == b"error: standard input is closed: give --input FILE\n"
    closed_out = subprocess.run(NMT + model, input=b"A dog.\n", stderr=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                preexec_fn=lambda: os.close(1))
    assert closed_out.returncode == 2
    assert closed_out.stderr == b"error: standard output is closed: give --output FILE\n"
    threads = run(model + ["--threads", "-1"], b"A dog.\n")
    assert threads.returncode == 2 and threads.stderr == b"error: --threads must be at least 1, not -1\n"
    ascii_locale = run(model + ["--beam", "1"], "Un café \U0001f600.\n".encode(), env={"PYTHONIOENCODING": "ascii"})
    # nothing said but, on a busy machine, the progress line a run over 5 s gives
    assert ascii_locale.returncode == 0
    assert all(re.fullmatch(rb"INFO: \d+ lines, [\d.]+ lines/s", line) for line in ascii_locale.stderr.splitlines())
    written = ascii_locale.stdout.decode("utf-8")  # as UTF-8, whatever the locale says
    assert written.count("\n") == 1 and "\U0001f600" in written  # the emoji comes back through its placeholder


def test_a_stop_signal_during_a_write_counts_the_line_it_interrupted(translator):
    """The signal handler of `interruptible` calls stop_now_or_later: here it comes in the middle of the
    second line's write, and the report must count that line, which is written whole."""
    from nmt.errors import held_stops, stop_now_or_later

    class StoppedWhileWriting(io.StringIO):
        def write(self, text):
            written = super().write(text)
            if self.getvalue().count("\n") == 2:
                stop_now_or_later(signal.SIGHUP)
            return written

    sink = StoppedWhileWriting()
    with pytest.raises(Interrupted) as stopped:
        translate_stream(translator, io.BytesIO(b"A dog.\nA cat.\nA bird.\n"), sink, quiet=True)
    assert stopped.value.lines_written == sink.getvalue().count("\n") == 2
    done = []
    with pytest.raises(Interrupted):
        with held_stops():
            stop_now_or_later(signal.SIGINT)
            done.append("the rest of the block")
    assert done == ["the rest of the block"]


def test_a_model_s_clause_split_default_cuts_long_sentences_without_a_warning(tiny_checkpoint, tmp_path, caplog):
    checkpoint = load_checkpoint(tiny_checkpoint)
    options = SearchOptions(beam_size=1, max_len_a=1.0, max_len_b=5)
    sentence = "A man rides a bike down the street, and two dogs run after him in the park."
    whole = Translator.from_checkpoint(checkpoint, decoding(checkpoint, options))
    assert len(whole._units(sentence)) == 1
    split = dataclasses.replace(checkpoint, decoding={**checkpoint.decoding, "max_piece_tokens": 8})
    clauses = Translator.from_checkpoint(split, decoding(split, options))
    units = clauses._units(sentence)
    assert clauses.max_piece_tokens == 8 and len(units) > 1
    assert all(len(piece) <= 8 for unit in units for piece in unit.pieces)
    assert Translator.from_checkpoint(split, decoding(split, options, clause_split=128))._units(sentence) == \
        whole._units(sentence)
    with caplog.at_level(logging.WARNING, logger="nmt"):
        clauses.translate([sentence])
    assert "translated in pieces" not in caplog.text  # a cut the model asks for is no surprise
    with pytest.raises(UsageError, match="--clause-split"):
        Translator.from_checkpoint(checkpoint, decoding(checkpoint, options, clause_split=0))


def test_protect_names_puts_names_the_vocabulary_splits_behind_placeholders(tiny_checkpoint):
    checkpoint = load_checkpoint(tiny_checkpoint)
    options = SearchOptions(beam_size=1, max_len_a=1.0, max_len_b=5)
    sentence = "A man meets Ifeoma Oyelaran in Kraków."
    plain = Translator.from_checkpoint(checkpoint, decoding(checkpoint, options))
    assert plain.tokenizer.has_placeholders and plain._unit(sentence).protected.originals == ()
    named = Translator.from_checkpoint(checkpoint, decoding(checkpoint, options, protect_names=True))
    assert named._unit(sentence).protected.originals == ("Ifeoma Oyelaran", "Kraków")
    stored = dataclasses.replace(checkpoint, decoding={**checkpoint.decoding, "protect_names": True})
    assert Translator.from_checkpoint(stored, decoding(stored, options)).protect_names
    translation = named.translate([sentence])[0].text
    assert "Ifeoma Oyelaran" in translation and "Kraków" in translation  # even an untrained model keeps them


def test_a_translation_that_loses_a_number_is_translated_again_with_it_protected(translator):
    """Numbers ("35", "1,249.99") and numbers with words ("1980s", "81st") go to the model as text
    (nmt.text.protect); where its translation drops their digits (this random model always does), the line is
    translated again at the end with them behind placeholders, as codes are: the digits come back, in every
    line, written as French does whatever path they took (nmt.text.conventions), and the line order holds."""
    assert translator.tokenizer.has_placeholders
    lines = ["In the 1980s the 35-year-old ran 10km.", "A dog runs.", "He finished 81st.",
             "Two men paid 1,249.99 for 35 chairs."]
    found = translator.translate(lines)
    assert [t.source for t in found] == lines
    for translation, digits in zip(found, (["1980", "35", "10"], [], ["81"], ["1\u202f249,99", "35"]), strict=True):
        text = translation.text
        assert all(number in text for number in digits), text
    assert "35-year-old" in found[0].text  # behind a placeholder the letters stay as they were
    assert "années 1980" in found[0].text and "81e" in found[2].text  # but decades and ordinals come back in French
    assert "1980s" not in found[0].text and "81st" not in found[2].text


def test_a_translation_that_loses_a_first_name_is_translated_again_with_it_protected(translator):
    """Issue 62: first names go to the model as text; where its translation loses one (this random model
    does), the line is translated again with it behind a placeholder, and it comes back."""
    lines = ["Bob will fix the bug.", "A dog runs.", "Ask Marie and Thomas."]
    found = translator.translate(lines)
    assert [t.source for t in found] == lines
    assert "Bob" in found[0].text and "Marie" in found[2].text and "Thomas" in found[2].text


def test_a_translation_that_loses_a_company_is_translated_again_with_it_protected(translator):
    """"Apple Inc. reported record profits." came out "Inc. Enregistrer les bénéfices enregistrés.": this random
    model loses the company too, and the retry brings it back whole."""
    found = translator.translate(["Apple Inc. reported record profits.", "Shares of Acme Ltd. fell.",
                                  "He was taken to St. Mary's Hospital."])
    assert "Apple Inc." in found[0].text and "Acme Ltd." in found[1].text and "St. Mary" in found[2].text


def test_a_couple_the_model_loses_one_of_is_translated_again_behind_one_placeholder(translator):
    """"Mr. and Mrs. Brown" goes to the model as two people; this random model loses Mrs, so the line is
    translated again with the couple behind one placeholder, which comes back as French writes it."""
    found = translator.translate(["Mr. and Mrs. Brown live here."])
    assert "M. et Mme Brown" in found[0].text


def test_a_lone_surrogate_in_a_json_record_is_one_replaced_character_not_an_aborted_run(tiny_checkpoint):
    """Issue 83: JSON can write "\\ud800", which sentencepiece refuses and no UTF-8 output can hold."""
    lines = b'{"source": "\\ud800 A dog runs."}\n{"source": "Two men talk."}\n'
    result = run(["--model", str(tiny_checkpoint), "--input-format", "jsonl", "--format", "jsonl", "-q"], lines)
    assert result.returncode == 0, result.stderr
    records = [json.loads(line) for line in result.stdout.decode().splitlines()]
    assert len(records) == 2 and records[0]["source"] == "\ufffd A dog runs."


def test_a_link_planted_where_the_partial_output_goes_is_not_followed(tiny_checkpoint, tmp_path):
    """Issue 83: `-o OUT` wrote OUT.partial through a symbolic link planted there, over the link's target."""
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n")
    (tmp_path / "out.fr.partial").symlink_to(victim)
    result = run(["--model", str(tiny_checkpoint), "-o", str(tmp_path / "out.fr"), "-q"], b"A dog runs.\n")
    assert result.returncode == 0, result.stderr
    assert victim.read_text() == "keep me\n" and (tmp_path / "out.fr").read_text().count("\n") == 1
    assert not (tmp_path / "out.fr.partial").exists()
