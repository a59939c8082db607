import gzip
from collections import Counter

from nmt.data import casing_counts
from nmt.text.casing import casing_table, count_casing, load_casing


def test_the_table_holds_words_running_text_writes_in_lower_case_and_the_names_made_of_them():
    lines = ["Please open the file now.", "Save the file first.", "The file menu has Save.",
             "He works on Wall Street.", "Wall Street fell on Monday.", "Shares on Wall Street rose.",
             "I met Okafor at the street market.", "Okafor and the street vendors left.",
             "A quiet street.", "They crossed the street.",
             "We saw The End twice.", "He wrote The End again.", "Read The End now.", "The end came.",
             "Open File Menu", "SAVE THE FILE NOW",  # Title Case and capitals say nothing of a word's case
             "File your taxes on time."]  # nor does a sentence's first word
    words, pairs = Counter(), Counter()
    count_casing(lines, words, pairs)
    assert words["file"] == 3 and words["File"] == 0 and words["Save"] == 1 and words["Okafor"] == 1
    lines_of_table = casing_table(words, pairs)
    lower = {line for line in lines_of_table if " " not in line}
    assert {"file", "street", "the"} <= lower
    assert "okafor" not in lower and "save" not in lower  # never lower-cased, or seen only once
    # seen three times; "The End" too, but a pair with a small word is a bit of a title
    assert [line for line in lines_of_table if " " in line] == ["Wall Street"]


def test_a_table_written_is_read_back_and_tells_names_from_heading_words(tmp_path):
    path = tmp_path / "casing.txt.gz"
    path.write_bytes(gzip.compress(b"file\nstreet\nwall\nWall Street\n"))
    casing = load_casing(path)
    assert not casing.keeps_capital(["Open", "File"], 1)
    assert casing.keeps_capital(["Visit", "Wall", "Street"], 2) and casing.keeps_capital(["Wall", "Street"], 0)
    assert not casing.keeps_capital(["Okafor", "Street"], 1)
    assert casing.keeps_capital(["Open", "Facebook,"], 1)  # a word the table does not hold is a name


def test_the_shipped_table_knows_heading_words_from_names():
    casing = load_casing()
    for heading in (["Print", "Preview"], ["Release", "Notes"], ["User", "Guide"]):
        assert not casing.keeps_capital(heading, 1)
    for name in (["Barack", "Obama"], ["Wall", "Street"], ["European", "Union"], ["Studying", "Facebook"]):
        assert casing.keeps_capital(name, 1)


def test_the_table_is_built_from_english_files(tmp_path):
    english = tmp_path / "train.en"
    english.write_text("Open the file.\nCross the street.\nVisit Wall Street today.\n" * 3, encoding="utf-8")
    out = tmp_path / "casing.txt.gz"
    casing_counts.main([str(english), "--out", str(out)])
    casing = load_casing(out)
    assert "file" in casing.lower and "Wall Street" in casing.names
    assert not casing.keeps_capital(["Open", "File"], 1) and casing.keeps_capital(["Wall", "Street"], 1)


def test_a_first_word_capitalized_only_for_opening_its_sentence_is_told_from_a_name_or_a_heading():
    from nmt.text.casing import lowered_opening

    casing = load_casing()
    assert lowered_opening("Sales rose 12% in the third quarter.", casing) == "Sales"
    assert lowered_opening("(Contributed by Victor Stinner in 18395.)", casing) == "Contributed"
    assert lowered_opening('"Wet dishtowels do not belong on the floor."', casing) == "Wet"
    assert lowered_opening("Kill process", casing) == "Kill"
    for kept in ("Iris Meder was disappointed.",  # a name after it: a first name, or a heading's word
                 "Magenta Channel", "High-quality Conversion", "Wall Street fell.",
                 "Okafor left.",  # never seen in lower case: a name
                 "It's here", "eBay sells", "NASA said", "42 people"):
        assert lowered_opening(kept, casing) is None, kept


def test_a_copied_first_word_is_one_inside_a_french_sentence_with_its_capital():
    from nmt.text.casing import copied_word

    assert copied_word("Sales", "Les Sales ont augmenté.") and copied_word("Kill", "Le processus de Kill")
    assert copied_word("High", "Conversion High-quality")
    # where a French sentence starts, a capital says nothing: "Culture" may be French
    for word, opening in (("Sales", "Sales ont augmenté."), ("Sales", "Bien. Sales ont"),
                          ("Oh", "« Bien. » « Oh vraiment"), ("Contributed", "(Contributed de X)"),
                          ("Fresh", "Il dit : Fresh"), ("Oh", "- Oh, ce sera dur.")):
        assert not copied_word(word, opening), opening
    assert copied_word("Contributed", "(Contributed de X)", anywhere=True)  # a word French does not have
    assert not copied_word("Sales", "Les ventes sales.") and not copied_word("Low", "Un X-Low")
