"""Weblate's own machinery code driven against `nmt serve` (run by tests/test_weblate.py under the Python of a
virtual environment holding Weblate, `make test-weblate`): Weblate configures nmt as a LibreTranslate and as a
DeepL service as its settings page does (validate_settings), asks for suggestions as its editor does
(MachineTranslation.translate over units of its own test module), sends a project's glossary as it does, and
prints what came back as one JSON object.

    python tests/weblate_driver.py configure http://127.0.0.1:5000 [KEY]   # settings, suggestions, glossary
    python tests/weblate_driver.py suggest http://127.0.0.1:5000 [KEY]     # "ready", then suggestions as soon as
                                                                           # the port takes connections
"""

from __future__ import annotations

import json
import os
import socket
import sys
import tempfile
import time
import types

DATA_DIR = tempfile.mkdtemp(prefix="nmt-weblate-")


def configure_django() -> None:
    """Weblate's example settings over SQLite and an in-memory cache in a temporary folder."""
    settings = types.ModuleType("nmt_weblate_settings")
    exec("from weblate.settings_example import *", settings.__dict__)  # noqa: S102 - Weblate's own settings
    settings.DATA_DIR = DATA_DIR
    settings.DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3",
                                      "NAME": os.path.join(DATA_DIR, "weblate.db")}}
    settings.CACHES = {name: {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}
                       for name in ("default", "avatar")}
    sys.modules["nmt_weblate_settings"] = settings
    os.environ["DJANGO_SETTINGS_MODULE"] = "nmt_weblate_settings"
    import django

    django.setup()


UNITS = [("Hello, %s!", "c-format"), ("Delete {count} files?", "python-brace-format"),
         ("Click <strong>all</strong> files to <a href=\"/help\">read</a> them.", ""),
         ("Your order has shipped.", ""), ("Save your changes", ""), ("Add the item to your cart.", "")]
GLOSSARY = "cart\tchariot\nitem\tarticle\n"


def suggestions(machine, source: str, flags: str = "") -> list[str]:
    from weblate.checks.tests.test_checks import MockUnit

    return [each["text"] for found in machine.translate(MockUnit(code="fr", source=source, flags=flags))
            for each in found]


def main() -> None:
    mode, url, key = sys.argv[1], sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else ""
    configure_django()
    from django.core.cache import cache
    from weblate.machinery.deepl import DeepLTranslation
    from weblate.machinery.libretranslate import LibreTranslateTranslation

    report = {}
    if mode == "suggest":  # as soon as nmt takes connections again, as Weblate's editor would, its model loading
        print("ready", flush=True)
        host, port = url.rsplit("/", 1)[-1].split(":")
        while True:
            try:
                socket.create_connection((host, int(port)), timeout=1).close()
                break
            except OSError:
                time.sleep(0.005)
        machines = [LibreTranslateTranslation({"url": url + "/", "key": key}),
                    DeepLTranslation({"url": url + "/v2/", "key": key or "any", "formality": "default"})]
        report["suggestions"] = {machine.name: suggestions(machine, "Save your changes") for machine in machines}
        report["backing off"] = {machine.name: bool(machine.is_rate_limited()) for machine in machines}
        print(json.dumps(report, ensure_ascii=False))
        return
    libre = LibreTranslateTranslation({"url": url + "/", "key": key})
    libre.validate_settings()  # raises ValidationError where Weblate's settings form would refuse the service
    report["libre"] = {source: suggestions(libre, source, flags) for source, flags in UNITS}
    for formality in ("prefer_more", "prefer_less"):
        deepl = DeepLTranslation({"url": url + "/v2/", "key": key or "any", "formality": formality})
        deepl.validate_settings()
        report[f"deepl {formality}"] = {source: suggestions(deepl, source, flags) for source, flags in UNITS}
    deepl = DeepLTranslation({"url": url + "/v2/", "key": key or "any", "formality": "default"})
    cache.set("project-glossary-tsv-test-en-fr", GLOSSARY)  # the project's glossary, as Weblate caches it
    cache.delete(deepl.get_cache_key("glossaries"))
    report["deepl glossary"] = {source: suggestions(deepl, source, flags) for source, flags in UNITS}
    report["glossaries"] = deepl.list_glossaries()
    for glossary_id in report["glossaries"].values():
        deepl.delete_glossary(glossary_id)
    report["glossaries after delete"] = deepl.list_glossaries()
    print(json.dumps(report, ensure_ascii=False))


if __name__ == "__main__":
    main()
