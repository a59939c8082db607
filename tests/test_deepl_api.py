"""`nmt serve` speaks DeepL's API (nmt.apps.server.deepl): DeepL's own client library, pointed at it, works
unchanged: languages, text lists, tags, formality, glossaries, usage, keys and errors."""

from __future__ import annotations

import httpx
import pytest

from tests.test_serve import Server

deepl = pytest.importorskip("deepl")


@pytest.fixture(scope="module")
def server(tiny_checkpoint):
    running = Server(tiny_checkpoint, "--api-key", "secret-key")
    yield running
    assert running.stop() == 0


@pytest.fixture(scope="module")
def client(server):
    return deepl.Translator("secret-key", server_url=server.url)


def libre(server, text: str, **fields) -> str:
    answer = server.post("/translate", json={"q": text, "source": "en", "target": "fr", "api_key": "secret-key",
                                             **fields})
    assert answer.status_code == 200, answer.text
    return answer.json()["translatedText"]


def test_languages_and_usage_are_deepl_s_shapes(client):
    assert [(each.code, each.name) for each in client.get_source_languages()] == [("EN", "English")]
    targets = client.get_target_languages()
    assert [each.code for each in targets] == ["FR"] and targets[0].supports_formality is False  # no register tags
    pairs = client.get_glossary_languages()
    assert [(pair.source_lang, pair.target_lang) for pair in pairs] == [("en", "fr")]
    before = client.get_usage().character.count
    client.translate_text("A dog runs.", target_lang="FR")
    usage = client.get_usage()
    assert usage.character.count == before + len("A dog runs.") and not usage.any_limit_reached


def test_texts_come_back_in_order_as_the_libretranslate_api_translates_them(server, client):
    texts = ["A dog runs.", "Two men are playing football in the park.", "A woman reads a book."]
    results = client.translate_text(texts, source_lang="EN", target_lang="FR")
    assert [result.text for result in results] == [libre(server, text) for text in texts]
    assert all(result.detected_source_lang == "EN" and result.billed_characters == len(text)
               for result, text in zip(results, texts, strict=True))
    one = client.translate_text("A dog runs.", target_lang="fr")  # a code in lower case, as DeepL takes it
    assert one.text == results[0].text


def test_another_language_a_bad_formality_and_a_wrong_key_are_deepl_s_errors(server, client):
    with pytest.raises(deepl.DeepLException, match="target_lang"):
        client.translate_text("A dog runs.", target_lang="DE")
    check = httpx.post(server.url + "/v2/translate", json={"text": ["test"], "source_lang": "en", "target_lang": "de"},
                       headers={"Authorization": "DeepL-Auth-Key secret-key"})  # Weblate's check of a new service
    assert check.status_code == 200 and check.json()["translations"][0]["text"] == "test"
    assert "English to French" in check.headers["x-nmt-untranslated"]
    with pytest.raises(deepl.DeepLException, match="source_lang"):
        client.translate_text("Ein Hund.", source_lang="DE", target_lang="FR")
    with pytest.raises(deepl.DeepLException, match="formality"):  # the tiny model has no register tags
        client.translate_text("A dog runs.", target_lang="FR", formality="less")
    assert client.translate_text("A dog runs.", target_lang="FR", formality="prefer_less").text  # the model's own
    with pytest.raises(deepl.AuthorizationException):
        deepl.Translator("wrong-key", server_url=server.url).translate_text("A dog runs.", target_lang="FR")
    bare = httpx.post(server.url + "/v2/translate", data={"text": "A dog runs.", "target_lang": "FR"},
                      headers={"Authorization": "DeepL-Auth-Key secret-key"})  # a form, as older clients send
    assert bare.status_code == 200 and bare.json()["translations"][0]["text"] == libre(server, "A dog runs.")
    empty = httpx.post(server.url + "/v2/translate", json={"target_lang": "FR"},
                       headers={"Authorization": "DeepL-Auth-Key secret-key"})
    assert empty.status_code == 400 and "text" in empty.json()["message"]


def test_ignored_tags_stay_as_they_are_and_the_text_around_them_is_translated(server, client):
    text = 'Delete <x id="1"/> files of <x id="2"/>?'
    result = client.translate_text(text, target_lang="FR", tag_handling="xml", ignore_tags=["x"]).text
    assert result.count('<x id="1"/>') == 1 and result.count('<x id="2"/>') == 1
    html = client.translate_text("A dog <b>runs</b> in the park.", target_lang="FR", tag_handling="html").text
    assert html.count("<b>") == 1 and html.count("</b>") == 1
    assert html.replace("<b>", "").replace("</b>", "").split() == libre(server, "A dog runs in the park.").split()


def test_a_glossary_is_created_listed_used_and_deleted(client):
    glossary = client.create_glossary("pets", source_lang="EN", target_lang="FR", entries={"dog": "toutou"})
    assert glossary.entry_count == 1 and glossary.ready and glossary.source_lang == "EN"
    assert [each.glossary_id for each in client.list_glossaries()] == [glossary.glossary_id]
    assert client.get_glossary_entries(glossary) == {"dog": "toutou"}
    assert client.get_glossary(glossary.glossary_id).name == "pets"
    used = client.translate_text("A dog runs.", source_lang="EN", target_lang="FR", glossary=glossary).text
    assert "toutou" in used  # the term is in the translation, as `nmt translate --glossary` puts it
    plain = client.translate_text("A dog runs.", source_lang="EN", target_lang="FR").text
    assert "toutou" not in plain  # another request, without the glossary, is not given its terms
    client.delete_glossary(glossary)
    assert client.list_glossaries() == []
    with pytest.raises(deepl.GlossaryNotFoundException):
        client.get_glossary(glossary.glossary_id)
    with pytest.raises(deepl.DeepLException, match="(?i)not found"):
        client.translate_text("A dog runs.", source_lang="EN", target_lang="FR", glossary=glossary.glossary_id)
    with pytest.raises(deepl.DeepLException, match="language pair"):
        client.create_glossary("de", source_lang="EN", target_lang="DE", entries={"dog": "Hund"})
