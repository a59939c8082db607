"""The web page of `nmt serve` in a real browser (headless Chromium through selenium): `make test-browser`,
which installs both. `make test` leaves it out (the `browser` marker)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import httpx
import pytest

from tests.test_serve import Server

pytestmark = pytest.mark.browser


def chromium():
    """A headless Chromium through selenium, its window the size of a laptop's."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=900,700"):
        options.add_argument(flag)
    options.binary_location = shutil.which("chromium") or shutil.which("google-chrome") or ""
    return webdriver.Chrome(options=options, service=Service(shutil.which("chromedriver")))


def test_the_page_translates_what_is_typed(tiny_checkpoint, tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    server = Server(tiny_checkpoint)
    driver = chromium()
    try:
        text = "A dog runs in the snow.\nTwo men are talking."
        expected = server.post("/translate", json={"q": text, "source": "en", "target": "fr"}).json()["translatedText"]
        driver.get(server.url + "/")
        box = driver.find_element(By.ID, "english")
        box.clear()
        box.send_keys(text)
        driver.find_element(By.ID, "go").click()
        french = driver.find_element(By.ID, "french")
        WebDriverWait(driver, 30).until(lambda _: french.text.strip())
        assert french.text == expected and len(french.text.split("\n")) == 2
        assert driver.find_element(By.ID, "status").text == ""
        assert driver.find_element(By.ID, "warning").text == ""  # English: no warning
        box.clear()
        box.send_keys("Merci beaucoup pour votre aide, nous arriverons demain matin.")
        driver.find_element(By.ID, "go").click()
        warning = driver.find_element(By.ID, "warning")
        WebDriverWait(driver, 30).until(lambda _: warning.text.strip())
        assert warning.text.startswith("This looks like French")
        subtitles = Path(__file__).parent / "files" / "dialogue.srt"
        driver.find_element(By.ID, "file").send_keys(str(subtitles))
        driver.find_element(By.ID, "go-file").click()
        link = driver.find_element(By.ID, "download")
        WebDriverWait(driver, 120).until(lambda _: link.is_displayed())
        direct = httpx.post(server.url + "/translate_file", timeout=120, files={"file": (subtitles.name,
                                                                                         subtitles.read_bytes())})
        assert httpx.get(link.get_attribute("href")).content == httpx.get(direct.json()["translatedFileUrl"]).content
        driver.save_screenshot(os.environ.get("NMT_SCREENSHOT", str(tmp_path / "page.png")))
    finally:
        driver.quit()
        assert server.stop() == 0


def test_the_page_asks_for_the_register_chosen_where_the_model_has_register_tags(tagged_checkpoint):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select, WebDriverWait

    server = Server(tagged_checkpoint)
    driver = chromium()
    try:
        text = "A dog runs in the snow.\nTwo men are talking."
        driver.get(server.url + "/")
        for choice in ("less", "more"):
            expected = server.post("/translate", json={"q": text, "source": "en", "target": "fr",
                                                       "formality": choice}).json()["translatedText"]
            Select(driver.find_element(By.ID, "formality")).select_by_value(choice)
            box = driver.find_element(By.ID, "english")
            box.clear()
            box.send_keys(text)
            french = driver.find_element(By.ID, "french")
            driver.execute_script("arguments[0].textContent = ''", french)
            driver.find_element(By.ID, "go").click()
            WebDriverWait(driver, 30).until(lambda _, shown=french: shown.text.strip())
            assert french.text == expected, choice
    finally:
        driver.quit()
        assert server.stop() == 0
