"""Language identification (nmt.text.language), for nmt serve's /detect and source "auto"."""

from nmt.text.language import detect, is_not_english


def test_language_detection_is_sure_of_sentences_and_takes_the_too_short_as_english():
    assert detect("Der Hund läuft heute im großen Park.")[0].language == "de"
    assert detect("Two dogs are playing in the snow.")[0].language == "en"
    assert is_not_english("Merci beaucoup pour votre aide.") and not is_not_english("Where is the station?")
    assert not is_not_english("OK") and not is_not_english("12:30")  # nothing to tell by: English
