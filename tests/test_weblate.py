"""Weblate adds nmt from its settings page and gets suggestions from it, through LibreTranslate's API and DeepL's,
with Weblate's own machinery code (Weblate from PyPI in a virtual environment of its own, NMT_WEBLATE_PYTHON: `make
test-weblate`, which CI runs); a restart of nmt while Weblate asks leaves Weblate asking, not backing off."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from nmt.apps.shipped import model_path
from tests.test_serve import free_port

pytestmark = pytest.mark.weblate
DRIVER = Path(__file__).with_name("weblate_driver.py")


def weblate(mode: str, url: str) -> subprocess.Popen:
    python = os.environ.get("NMT_WEBLATE_PYTHON")
    assert python, "NMT_WEBLATE_PYTHON names the Python of a virtual environment with Weblate: `make test-weblate`"
    return subprocess.Popen([python, str(DRIVER), mode, url], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def report_of(driver: subprocess.Popen) -> dict:
    out, err = driver.communicate(timeout=900)
    assert driver.returncode == 0, err[-3000:]
    return json.loads(out.splitlines()[-1])


def serve(port: int) -> subprocess.Popen:
    """`nmt serve` with the default shipped model, once its port takes connections (its model may still load)."""
    process = subprocess.Popen([sys.executable, "-m", "nmt_cli.main", "serve", "--port", str(port)],
                               stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    while True:
        assert process.poll() is None and time.monotonic() < deadline, process.stderr.read().decode()[-2000:]
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return process
        except OSError:
            time.sleep(0.02)


def stop(process: subprocess.Popen) -> None:
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=120) == 0


def test_weblate_configures_nmt_through_both_apis_and_keeps_asking_across_a_restart():
    assert model_path(None).is_file()
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    server = serve(port)
    try:
        report = report_of(weblate("configure", url))  # validate_settings() passed for LibreTranslate and DeepL
    finally:
        stop(server)
    for api in ("libre", "deepl prefer_more", "deepl prefer_less", "deepl glossary"):
        found = {source: texts[0] for source, texts in report[api].items()}
        assert "%s" in found["Hello, %s!"] and "{count}" in found["Delete {count} files?"]
        tagged = found['Click <strong>all</strong> files to <a href="/help">read</a> them.']
        assert tagged.count("<strong>") == tagged.count("</strong>") == 1 and '<a href="/help">' in tagged
        inside = tagged.split("<strong>")[1].split("</strong>")[0]
        link = tagged.split('<a href="/help">')[1].split("</a>")[0]
        assert inside.strip() not in ("", "all") and link.strip() not in ("", "read"), tagged  # translated
    assert "vos" in report["deepl prefer_more"]["Save your changes"][0]
    assert "tes" in report["deepl prefer_less"]["Save your changes"][0].split()
    assert "article" in report["deepl glossary"]["Add the item to your cart."][0]  # the project's glossary
    assert "article" not in report["deepl prefer_more"]["Add the item to your cart."][0]  # without it
    assert [name.split(":")[2:4] for name in report["glossaries"]] == [["EN", "FR"]]
    assert report["glossaries after delete"] == {}

    asking = weblate("suggest", url)  # Weblate asks as soon as nmt takes connections again, its model loading
    assert asking.stdout.readline() == "ready\n"
    restarted = serve(port)
    try:
        after = report_of(asking)
    finally:
        stop(restarted)
    assert all(after["suggestions"].values()) and not any(after["backing off"].values())
