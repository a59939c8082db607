"""`nmt serve` end to end: the real server on a loopback port, spoken to over HTTP with httpx."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

httpx = pytest.importorskip("httpx")
pytest.importorskip("fastapi")

DECODING = ["--exact", "--beam", "2", "--max-len-a", "1.0", "--max-len-b", "5"]
LINES = ["A dog runs.", "", "Two men are playing football in the park.", "A WOMAN READS A BOOK.", "Hello"]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Server:
    def __init__(self, model, *options: str, env: dict | None = None):
        self.model = model
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.process = subprocess.Popen(
            [sys.executable, "-m", "nmt_cli.main", "serve", "--model", str(model), "--port", str(self.port), *DECODING,
             *options], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={**os.environ, **(env or {})})
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            assert self.process.poll() is None, self.process.stderr.read().decode()
            try:
                if httpx.get(self.url + "/health").status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        raise AssertionError("the server did not become ready")

    def post(self, path: str, **kwargs) -> httpx.Response:
        return httpx.post(self.url + path, **{"timeout": 60, **kwargs})

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout=60)


@pytest.fixture(scope="module")
def server(tiny_checkpoint):
    running = Server(tiny_checkpoint, "--max-chars", "2000", "--token-limit", "500", "--max-queue", "60",
                     "--batch-wait-ms", "50", "--read-timeout", "1")
    yield running
    assert running.stop() == 0


@pytest.fixture(scope="module")
def cli_records(tiny_checkpoint):
    """What `nmt translate --format jsonl` prints for LINES with the server's options."""
    done = subprocess.run([sys.executable, "-m", "nmt_cli.main", "translate", "--model", str(tiny_checkpoint),
                           *DECODING, "--format", "jsonl"], input="\n".join(LINES).encode() + b"\n",
                          capture_output=True, check=True)
    return [json.loads(line) for line in done.stdout.decode().splitlines()]


def test_a_request_sent_while_the_model_loads_is_held_and_answered_not_refused(tiny_checkpoint, tmp_path):
    """Weblate stops asking a service for 30 minutes after one 503: a server that restarts must not answer one.
    A large --memory makes loading take seconds, while /health says 503 and /translate waits for the model."""
    memory = tmp_path / "large.tsv"
    memory.write_text("".join(f"Line number {n} of the memory\tLigne numéro {n} de la mémoire\n"
                              for n in range(400_000)))
    port = free_port()
    process = subprocess.Popen([sys.executable, "-m", "nmt_cli.main", "serve", "--model", str(tiny_checkpoint),
                                "--port", str(port), "--memory", str(memory), *DECODING], stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}"
    try:
        health = None
        while health is None:
            assert process.poll() is None, process.stderr.read().decode()
            try:
                health = httpx.get(url + "/health").status_code
            except httpx.TransportError:
                time.sleep(0.02)
        assert health == 503  # still loading the memory: the request below arrives before the model can answer
        answer = httpx.post(url + "/translate", json={"q": "A dog runs.", "source": "en", "target": "fr"}, timeout=120)
        assert answer.status_code == 200 and answer.json()["translatedText"]
        assert httpx.get(url + "/health").status_code == 200
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=60) == 0


def test_health_languages_docs_and_page(server):
    health = httpx.get(server.url + "/health").json()
    assert health["status"] == "ok"
    # the configuration resolved from the flags (--exact: fp32), the model's defaults and the library's
    assert health["decoding"]["precision"] == "fp32" and health["decoding"]["workers"] == 1
    assert health["decoding"]["search"]["beam_size"] == 2 and health["decoding"]["search"]["max_len_a"] == 1.0
    languages = httpx.get(server.url + "/languages").json()
    assert {"code": "en", "name": "English", "targets": ["fr"]} in languages
    assert "/v1/translate" in httpx.get(server.url + "/openapi.json").json()["paths"]
    assert httpx.get(server.url + "/docs").status_code == 200
    page = httpx.get(server.url + "/")
    assert page.status_code == 200 and "<textarea" in page.text and "{{" not in page.text
    assert "<code>tiny.pt</code>" in page.text and "image captions" not in page.text  # the model it serves


def test_libretranslate_requests_answer_what_the_cli_prints(server, cli_records):
    expected = [record["translation"] for record in cli_records]
    listed = server.post("/translate", json={"q": LINES, "source": "en", "target": "fr", "format": "text"})
    assert listed.status_code == 200 and listed.json() == {"translatedText": expected}
    one = server.post("/translate", json={"q": LINES[2], "source": "auto", "target": "fr"})
    assert one.json()["translatedText"] == expected[2]
    detected = one.json()["detectedLanguage"]
    assert detected["language"] == "en" and 50 < detected["confidence"] <= 100
    form = server.post("/translate", data={"q": LINES[0], "source": "en", "target": "fr"})
    assert form.status_code == 200 and form.json()["translatedText"] == expected[0]
    lines = server.post("/translate", json={"q": "\n".join(LINES[:3]), "source": "en", "target": "fr"})
    assert lines.json()["translatedText"] == "\n".join(expected[:3])  # a text's lines keep their breaks


def test_detect_and_auto_refuse_what_is_not_english_in_libretranslate_s_shapes(server):
    french = "Merci beaucoup pour votre aide, nous arriverons demain matin."
    guesses = server.post("/detect", data={"q": french}).json()
    assert guesses[0]["language"] == "fr" and guesses[0]["confidence"] > 90
    assert [g["confidence"] for g in guesses] == sorted((g["confidence"] for g in guesses), reverse=True)
    assert server.post("/detect", json={"q": LINES[2]}).json()[0]["language"] == "en"
    refused = server.post("/translate", json={"q": ["A dog runs.", french], "source": "auto", "target": "fr"})
    assert refused.status_code == 400 and set(refused.json()) == {"error"} and "looks fr" in refused.json()["error"]
    short = server.post("/translate", json={"q": "OK", "source": "auto", "target": "fr"})
    assert short.status_code == 200  # too short to tell: taken to be English
    settings = httpx.get(server.url + "/frontend/settings").json()
    assert settings["charLimit"] == 2000 and settings["keyRequired"] is False
    assert settings["language"]["target"] == {"code": "fr", "name": "French"}


def test_libretranslate_s_own_python_client_works_against_nmt_serve(server, cli_records):
    from libretranslatepy import LibreTranslateAPI  # in the dev extra: the client LibreTranslate's users have

    client = LibreTranslateAPI(server.url + "/")
    assert client.translate(LINES[0], "en", "fr") == cli_records[0]["translation"]
    assert client.translate(LINES[2], "auto", "fr") == cli_records[2]["translation"]
    assert client.detect("Bonjour tout le monde, comment allez-vous ?")[0]["language"] == "fr"
    assert {"code": "en", "name": "English", "targets": ["fr"]} in client.languages()


def raw_request(server, head: bytes, body_parts=(), pause: float = 0.0) -> bytes:
    """What the server answers to a request sent by hand over a socket: `head` (request line and headers),
    then each body part after `pause` seconds."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as connection:
        connection.sendall(head)
        for part in body_parts:
            time.sleep(pause)
            try:
                connection.sendall(part)
            except OSError:  # the server answered and closed first
                break
        answer = b""
        try:
            while chunk := connection.recv(65536):
                answer += chunk
        except ConnectionResetError:  # the server closed with bytes of ours unread: what came before stands
            pass
        return answer


@pytest.mark.slow
def test_requests_are_bounded_before_they_are_read(server):
    """A declared body over the limit is refused before it is sent; a chunked one as soon as it passes the
    limit; a client that stalls mid-body or mid-headers gets a 408 (--read-timeout 1), one that sends nothing
    is closed, an idle kept-alive connection is not cut short; a request with more lines than the queue can
    ever hold is a 413, not a 503 to retry for ever."""
    limit = 6 * 2000 + 65_536
    started = time.monotonic()
    declared = raw_request(server, b"POST /translate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                                   b"Content-Length: %d\r\n\r\n" % (10 * limit))
    assert declared.startswith(b"HTTP/1.1 413") and b'{"error":' in declared and time.monotonic() - started < 5
    chunk = b"x" * 65_536
    chunked = raw_request(server, b"POST /translate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                                  b"Transfer-Encoding: chunked\r\n\r\n",
                          [b"%x\r\n%s\r\n" % (len(chunk), chunk)] * 2)  # just past the limit: all read
    assert chunked.startswith(b"HTTP/1.1 413")
    stalled = raw_request(server, b"POST /translate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                                  b"Content-Length: 100\r\n\r\n", [b'{"q": "A dog', b' runs."}'], pause=3)
    assert stalled.startswith(b"HTTP/1.1 408")
    slow_headers = raw_request(server, b"POST /translate HTTP/1.1\r\nHost: x\r\n",
                               [b"Content-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"], pause=3)
    assert slow_headers.startswith(b"HTTP/1.1 408") and b"headers did not arrive within 1 s" in slow_headers
    started = time.monotonic()
    assert raw_request(server, b"") == b"" and time.monotonic() - started < 20
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as connection:
        for _ in range(2):  # the second request after an idle while longer than --read-timeout
            connection.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
            answer = connection.recv(65536)
            assert answer.startswith(b"HTTP/1.1 200"), answer
            length = int(re.search(rb"content-length: (\d+)", answer).group(1))
            while len(answer.partition(b"\r\n\r\n")[2]) < length:  # the body, if it came apart
                answer += connection.recv(65536)
            time.sleep(2)
    many = server.post("/translate", json={"q": "\n".join(["A dog."] * 61), "source": "en", "target": "fr"})
    assert many.status_code == 413 and "--max-queue" in many.json()["error"]
    assert server.post("/translate", json={"q": "A dog runs.", "source": "en", "target": "fr"}).status_code == 200


def test_format_html_translates_the_text_and_keeps_the_markup(server, tmp_path):
    page = '<p>A dog runs in the <b>snow</b>.</p>\n<pre>keep()</pre>'
    answer = server.post("/translate", json={"q": page, "source": "en", "target": "fr", "format": "html"})
    assert answer.status_code == 200, answer.text
    french = answer.json()["translatedText"]
    assert french.endswith("</p>\n<pre>keep()</pre>") and french.startswith("<p>") and french.count("<b>") == 1
    path = tmp_path / "page.html"
    path.write_text(page)
    cli = subprocess.run([sys.executable, "-m", "nmt_cli.main", "translate", "--model", str(server.model), *DECODING,
                          "-i", str(path), "-q"], capture_output=True, check=True, text=True).stdout
    assert french == cli


def test_translate_file_answers_a_url_to_the_file_the_cli_writes(server, tmp_path):
    """LibreTranslate's /translate_file: a subtitle file and a text file come back as `nmt translate -i`
    writes them, downloaded from the URL the answer gives; a file of no known kind is a 400."""
    subtitles = Path(__file__).parent / "files" / "dialogue.srt"
    text = tmp_path / "notes.txt"
    text.write_text("A dog runs.\r\n\r\nTwo men are talking.\r\n")
    for path in (subtitles, text):
        answer = httpx.post(server.url + "/translate_file", timeout=120, data={"source": "en", "target": "fr"},
                            files={"file": (path.name, path.read_bytes())})
        assert answer.status_code == 200, answer.text
        url = answer.json()["translatedFileUrl"]
        assert url.startswith(server.url + "/download_file/") and url.endswith(f"{path.stem}.fr{path.suffix}")
        downloaded = httpx.get(url)
        cli = subprocess.run([sys.executable, "-m", "nmt_cli.main", "translate", "--model", str(server.model),
                              *DECODING, "-i", str(path), "-q"], capture_output=True, check=True).stdout
        assert downloaded.status_code == 200
        # a text file: one line for each line, its line endings kept (the CLI writes \n: it streams lines)
        assert downloaded.content == cli if path.suffix == ".srt" else (
            downloaded.content.decode().splitlines() == cli.decode().splitlines()
            and downloaded.content.count(b"\r\n") == 3)
    unknown = httpx.post(server.url + "/translate_file", files={"file": ("photo.jpg", b"\xff\xd8")})
    assert unknown.status_code == 400 and ".docx" in unknown.json()["error"]
    settings = httpx.get(server.url + "/frontend/settings").json()
    assert settings["filesTranslation"] is True and ".srt" in settings["supportedFilesFormat"]


def test_v1_answers_the_cli_jsonl_records(server, cli_records):
    answer = server.post("/v1/translate", json={"text": LINES})
    assert answer.status_code == 200
    records = answer.json()["translations"]
    assert [r["translation"] for r in records] == [r["translation"] for r in cli_records]
    for got, want in zip(records, cli_records, strict=True):
        assert set(got) == set(want) and got["flags"] == want["flags"]
        if want["score"] is not None:
            assert got["score"] == pytest.approx(want["score"], abs=1e-4)
    nbest = server.post("/v1/translate", json={"text": [LINES[0]], "beam": 3, "nbest": 2}).json()["translations"]
    assert len(nbest[0]["nbest"]) == 2


@pytest.mark.parametrize("path, body, status, message", [
    ("/translate", {"q": "A dog.", "source": "de", "target": "fr"}, 400, "en to fr"),
    ("/translate", {"q": "A dog.", "source": "en", "target": "fr", "format": "markdown"}, 400, "format"),
    ("/translate", {"q": 3, "source": "en", "target": "fr"}, 422, "q"),
    ("/translate", {"source": "en", "target": "fr"}, 422, "q"),
    ("/translate", {"q": "a" * 2001, "source": "en", "target": "fr"}, 413, "--char-limit"),
    ("/translate", {"q": ["A dog."] * 61, "source": "en", "target": "fr"}, 413, "--max-queue"),  # can never fit
    ("/translate", {"q": "zq " * 600, "source": "en", "target": "fr"}, 413, "--token-limit"),  # 1,800 characters
    ("/v1/translate", {"text": "not a list"}, 422, "text"),
    ("/v1/translate", {"text": ["A dog."], "beam": 0}, 422, "beam"),
    ("/v1/translate", {"text": ["A dog."], "colour": "red"}, 422, "colour"),
    ("/translate", {"q": "A dog.", "source": "en", "target": "fr", "formality": "more"}, 400, "register tags"),
    ("/translate", {"q": "A dog.", "source": "en", "target": "fr", "formality": "polite"}, 422, "formality"),
    ("/v1/translate", {"text": ["A dog."], "formality": "informal"}, 422, "register tags"),
])
def test_bad_requests_get_their_status_and_one_message(server, path, body, status, message):
    answer = server.post(path, json=body)
    assert answer.status_code == status and message in answer.json()["error"]
    if status == 503:
        assert answer.headers["retry-after"] == "1"


def test_text_in_another_script_costs_what_the_model_reads_not_its_bytes(server):
    chinese = "你好，世界。" * 330  # 1,980 characters: 5,940 tokens of bytes, over --token-limit 500
    answer = server.post("/translate", json={"q": chinese, "source": "en", "target": "fr"})
    assert answer.status_code == 200 and answer.json()["translatedText"] == chinese


def test_weblate_s_connection_check_is_answered_and_its_placeholders_come_back_around_translated_words(server):
    check = server.post("/translate", json={"q": "test", "source": "en", "target": "de"})
    assert check.status_code == 200 and check.json()["translatedText"] == "test"
    assert "English to French" in check.headers["x-nmt-untranslated"]
    other = server.post("/translate", json={"q": "A dog.", "source": "en", "target": "de"})
    assert other.status_code == 400  # anything else in German is refused, as /languages says
    marked = server.post("/translate", json={"q": "A [X2X]dog[X8X] runs [X20X] now.", "source": "en", "target": "fr"})
    text = marked.json()["translatedText"]
    assert marked.status_code == 200 and all(text.count(m) == 1 for m in ("[X2X]", "[X8X]", "[X20X]"))
    assert "<x" not in text and "&" not in text


def test_prefer_formality_falls_back_to_the_model_s_choice_where_it_has_no_register_tags(server, cli_records):
    answer = server.post("/translate", json={"q": LINES[0], "source": "en", "target": "fr",
                                             "formality": "prefer_less"})
    assert answer.status_code == 200 and answer.json()["translatedText"] == cli_records[0]["translation"]


@pytest.mark.slow
def test_the_formality_a_request_asks_for_is_what_the_cli_gives_for_it(tagged_checkpoint):
    expected = {}
    for formality in ("formal", "informal", "auto"):
        command = [sys.executable, "-m", "nmt_cli.main", "translate", "--model", str(tagged_checkpoint), *DECODING,
                   "--formality", formality]
        done = subprocess.run(command, input="\n".join(LINES).encode() + b"\n", capture_output=True, check=True)
        expected[formality] = done.stdout.decode().splitlines()
    assert len({tuple(lines) for lines in expected.values()}) > 1  # the tag changes what this model writes
    running = Server(tagged_checkpoint)
    try:
        for asked, formality in (("more", "formal"), ("less", "informal"), ("prefer_less", "informal"),
                                 ("default", "formal"), ("auto", "auto")):
            answer = running.post("/translate", json={"q": LINES, "source": "en", "target": "fr", "formality": asked})
            assert answer.json()["translatedText"] == expected[formality], asked
        records = running.post("/v1/translate", json={"text": LINES, "formality": "informal"}).json()["translations"]
        assert [r["translation"] for r in records] == expected["informal"]
    finally:
        assert running.stop() == 0


def test_one_request_s_bad_text_fails_no_other_and_errors_keep_libretranslate_s_shape(server, cli_records):
    """Issue 83: a lone surrogate (JSON's "\\ud800") failed the whole batch it was decoded in; a request without
    a target was answered; an unknown path answered FastAPI's shape; /suggest was a 404."""
    bad = b'{"q": "\\ud800 A dog runs. \\u0000", "source": "en", "target": "fr"}'
    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(lambda i: server.post("/translate", content=bad, headers={
            "content-type": "application/json"}) if i % 2 else server.post("/translate", json={
                "q": LINES[0], "source": "en", "target": "fr"}), range(16)))
    assert all(answer.status_code == 200 for answer in answers)
    assert {answer.json()["translatedText"] for i, answer in enumerate(answers) if not i % 2} == {
        cli_records[0]["translation"]}
    missing = server.post("/translate", json={"q": "A dog.", "source": "en"})
    assert missing.status_code == 400 and "target" in missing.json()["error"]
    unknown = httpx.get(server.url + "/no/such/path")
    assert unknown.status_code == 404 and "error" in unknown.json()
    suggest = server.post("/suggest", json={"q": "A dog.", "s": "Un chien.", "source": "en", "target": "fr"})
    assert suggest.status_code == 403 and "disabled" in suggest.json()["error"]
    nested = b'{"q": ' + b"[" * 20_000 + b"]" * 20_000 + b', "source": "en", "target": "fr"}'
    deep = server.post("/translate", content=nested, headers={"content-type": "application/json"})
    assert deep.status_code in (400, 422) and "error" in deep.json()


def test_metrics_are_labelled_by_route_not_by_raw_path(server):
    assert server.post("/translate", json={"q": "A dog.", "source": "en", "target": "fr"}).status_code == 200
    for number in range(20):
        httpx.get(f"{server.url}/unknown-{number}")
    page = httpx.get(server.url + "/metrics").text
    assert "unknown-1" not in page and 'path="unmatched"' in page and 'path="/translate"' in page


def test_a_translated_file_of_any_name_is_downloaded_with_its_name(server):
    name = "John’s rapport «final» 100% 🎉.txt"  # the page decodes the URL's name: a bare % would break it
    answer = httpx.post(server.url + "/translate_file", timeout=120, data={"source": "en", "target": "fr"},
                        files={"file": (name, b"A dog runs.\n")})
    assert answer.status_code == 200, answer.text
    url = answer.json()["translatedFileUrl"]
    assert url.endswith("/John%E2%80%99s%20rapport%20%C2%ABfinal%C2%BB%20100%25%20%F0%9F%8E%89.fr.txt")
    with urllib.request.urlopen(url, timeout=60) as response:  # which refuses a URL with a space or a quote
        assert response.read().decode() != ""
    downloaded = httpx.get(url)
    assert downloaded.status_code == 200
    header = downloaded.headers["content-disposition"]
    assert "filename*=UTF-8''" in header and "%F0%9F%8E%89" in header


def test_a_port_out_of_range_is_one_error_line():
    done = subprocess.run([sys.executable, "-m", "nmt_cli.main", "serve", "--port", "99999"], capture_output=True,
                          text=True)
    assert done.returncode == 2 and done.stderr == "error: --port must be a TCP port, 0 to 65535, not 99999\n"


def test_a_body_that_is_not_json_is_a_422(server):
    answer = server.post("/translate", content=b"{not json", headers={"content-type": "application/json"})
    assert answer.status_code == 422 and "JSON" in answer.json()["error"]


def test_a_concurrent_burst_is_batched_and_every_line_answered_in_order(server):
    sentences = [f"{count} dogs run in the park." for count in range(1, 25)]
    alone = server.post("/translate", json={"q": sentences, "source": "en", "target": "fr"}).json()["translatedText"]
    requests = [sentences[i : i + 3] for i in range(0, len(sentences), 3)] * 2

    def send(lines):
        return server.post("/translate", json={"q": lines, "source": "en", "target": "fr"}).json()["translatedText"]

    with ThreadPoolExecutor(len(requests)) as pool:
        answers = list(pool.map(send, requests))
    assert answers == [alone[sentences.index(lines[0]) : sentences.index(lines[0]) + 3] for lines in requests]
    metrics = httpx.get(server.url + "/metrics").text
    assert 'nmt_requests_total{code="200",path="/translate"}' in metrics
    count = float(next(line.split()[1] for line in metrics.splitlines() if line.startswith("nmt_batch_lines_count")))
    lines = float(next(line.split()[1] for line in metrics.splitlines() if line.startswith("nmt_batch_lines_sum")))
    assert lines / count > 3  # requests of 3 lines shared batches
    calls = float(next(line.split()[1] for line in metrics.splitlines() if line.startswith("nmt_call_seconds_count")))
    assert calls == count  # each call's time held in the engine, beside its lines


@pytest.mark.slow
def test_api_key_and_graceful_shutdown_with_a_request_in_flight(tiny_checkpoint):
    keyed = Server(tiny_checkpoint, "--batch-wait-ms", "1500", env={"NMT_API_KEY": "s3cret"})
    try:
        body = {"q": "A dog runs.", "source": "en", "target": "fr"}
        assert keyed.post("/translate", json=body).status_code == 401
        assert keyed.post("/translate", json={**body, "api_key": "wrong"}).status_code == 401
        assert keyed.post("/v1/translate", json={"text": ["A dog."]}).status_code == 401
        assert keyed.post("/translate", json={**body, "api_key": "s3cret"}).status_code == 200
        authorized = keyed.post("/v1/translate", json={"text": ["A dog."]}, headers={"Authorization": "Bearer s3cret"})
        assert authorized.status_code == 200
        answers = []
        sender = threading.Thread(target=lambda: answers.append(
            keyed.post("/translate", json={**body, "q": ["A dog runs."] * 5, "api_key": "s3cret"})))
        sender.start()
        deadline = time.monotonic() + 30
        while not re.search(r"^nmt_queue_lines 5\.0$", httpx.get(keyed.url + "/metrics").text, re.M):
            assert time.monotonic() < deadline  # accepted, and waiting 1.5 s for company
            time.sleep(0.02)
        keyed.process.send_signal(signal.SIGTERM)
        sender.join(60)
        assert answers and answers[0].status_code == 200 and len(answers[0].json()["translatedText"]) == 5
        assert keyed.process.wait(timeout=60) == 0
        with pytest.raises(httpx.TransportError):
            httpx.get(keyed.url + "/health")
    finally:
        keyed.stop()


def test_connections_are_limited_keys_checked_before_bodies_and_draining_bounded(tiny_checkpoint):
    """--max-connections 2: a third connection while two clients stall mid-body is served, the older stalled
    one giving way with a 503; a wrong key in the Authorization header is a 401 before the (huge) body is read;
    SIGTERM with a client still stalled ends the server after --drain-timeout, not when the client gives up."""
    bounded = Server(tiny_checkpoint, "--max-connections", "2", "--drain-timeout", "2", "--read-timeout", "60",
                     env={"NMT_API_KEY": "s3cret"})
    stalled = []
    try:
        wrong = raw_request(bounded, b"POST /translate HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer nope\r\n"
                                     b"Content-Length: 1000000000\r\n\r\n")
        assert wrong.startswith(b"HTTP/1.1 401")
        for _ in range(2):
            connection = socket.create_connection(("127.0.0.1", bounded.port), timeout=30)
            connection.sendall(b"POST /translate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                               b"Content-Length: 100\r\n\r\n{")
            stalled.append(connection)
            time.sleep(0.2)
        assert httpx.get(bounded.url + "/languages", timeout=30).status_code == 200
        assert stalled[0].recv(4096).startswith(b"HTTP/1.1 503")
        started = time.monotonic()
        bounded.process.send_signal(signal.SIGTERM)
        bounded.process.wait(timeout=30)
        assert time.monotonic() - started < 15  # 2 s of draining, then out; the stalled client would wait 60
    finally:
        for connection in stalled:
            connection.close()
        bounded.stop()


def test_a_port_in_use_is_one_error_line(tiny_checkpoint):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = subprocess.run([sys.executable, "-m", "nmt_cli.main", "serve", "--model", str(tiny_checkpoint),
                                 "--port", str(port)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    assert result.stderr == f"error: cannot listen on 127.0.0.1:{port}: Address already in use\n"
