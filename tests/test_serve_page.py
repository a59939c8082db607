"""The web page of `nmt serve` in a real browser (headless Chromium through selenium): `make test-browser`,
which installs both. `make test` leaves it out (the `browser` marker)."""

from __future__ import annotations

import os
import shutil
import time
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


def test_the_page_translates_as_you_type_counts_copies_offers_alternatives_and_takes_dropped_files(tiny_checkpoint,
                                                                                                  tmp_path):
    """What a LibreTranslate user expects of the page: the French as the typing pauses, the detected language,
    a character count against --char-limit, copy, alternatives to click, Ctrl+Enter, a file dropped on the page,
    and the same on a phone's screen (no sideways scrolling)."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import WebDriverWait

    server = Server(tiny_checkpoint, "--char-limit", "300")
    driver = chromium()
    try:
        driver.get(server.url + "/")
        driver.execute_script("window.copied = []; navigator.clipboard.writeText = async (text) => "
                              "{ window.copied.push(text); };")  # what Copy hands the clipboard, read back
        text = "A dog runs in the snow."
        body = {"q": text, "source": "en", "target": "fr", "alternatives": 3}
        expected = server.post("/translate", json=body).json()
        box, french = driver.find_element(By.ID, "english"), driver.find_element(By.ID, "french")
        box.clear()
        box.send_keys(text)  # no click: translated once the typing pauses
        WebDriverWait(driver, 30).until(lambda _: french.text == expected["translatedText"])
        assert driver.find_element(By.ID, "count").text == f"{len(text)} / 300"
        WebDriverWait(driver, 30).until(lambda _: driver.find_element(By.ID, "detected").text.startswith(
            "detected: English"))
        driver.find_element(By.ID, "copy").click()
        WebDriverWait(driver, 10).until(lambda _: driver.execute_script("return window.copied.length") == 1)
        assert driver.execute_script("return window.copied[0]") == expected["translatedText"]
        choices = driver.find_elements(By.CSS_SELECTOR, "#alternatives button")
        assert [choice.text for choice in choices] == expected["alternatives"]
        if choices:  # the tiny model's beam may find no other hypothesis
            choices[0].click()
            assert french.text == expected["alternatives"][0]
        driver.find_element(By.ID, "live").click()  # typing no longer translates; Ctrl+Enter does
        box.send_keys(Keys.CONTROL, Keys.END)
        box.send_keys(" Two men are talking.")
        time.sleep(1.5)
        assert french.text in [expected["translatedText"], *expected["alternatives"]]
        box.send_keys(Keys.CONTROL, Keys.ENTER)
        both = server.post("/translate", json={**body, "q": text + " Two men are talking."}).json()
        WebDriverWait(driver, 30).until(lambda _: french.text == both["translatedText"])
        box.send_keys("x" * 300)
        count = driver.find_element(By.ID, "count")
        assert "over" in count.get_attribute("class") and not driver.find_element(By.ID, "go").is_enabled()
        dropped = (Path(__file__).parent / "files" / "dialogue.srt").read_text(encoding="utf-8")
        driver.execute_script("""
            const data = new DataTransfer();
            data.items.add(new File([arguments[0]], "dialogue.srt", {type: "application/x-subrip"}));
            document.getElementById("drop").dispatchEvent(new DragEvent("drop", {dataTransfer: data, bubbles: true,
                                                                                cancelable: true}));""", dropped)
        link = driver.find_element(By.ID, "download")
        WebDriverWait(driver, 120).until(lambda _: link.is_displayed())
        assert link.text == "Download dialogue.fr.srt" and "-->" in httpx.get(link.get_attribute("href")).text
        shots = os.environ.get("NMT_SCREENSHOT", str(tmp_path / "page.png"))
        driver.save_screenshot(shots.replace(".png", "-wide.png"))
        driver.set_window_size(390, 844)  # a phone
        assert driver.execute_script("return document.documentElement.scrollWidth <= window.innerWidth")
        english_box, french_box = box.rect, french.rect
        assert french_box["y"] > english_box["y"] + english_box["height"] - 1  # one pane above the other
        driver.save_screenshot(shots.replace(".png", "-phone.png"))
    finally:
        driver.quit()
        assert server.stop() == 0
