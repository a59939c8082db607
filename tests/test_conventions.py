"""French conventions (nmt.text.conventions): the conventions set in tests/files/conventions.tsv, each line's
rendering exact, and the settings."""

from __future__ import annotations

from pathlib import Path

import pytest

from nmt.text.conventions import NBSP, NNBSP, Typography, punctuate, render_sentence

CASES = [line.split("\t") for line in (Path(__file__).parent / "files" / "conventions.tsv").read_text(
    encoding="utf-8").splitlines() if line and not line.startswith("#")]
FR = Typography("fr")


def written(text: str) -> str:
    return text.replace("·", NBSP).replace("^", NNBSP)


def rendered(source: str, translation: str, typography: Typography) -> str:
    return punctuate(render_sentence(source, translation, typography), typography)


def test_the_conventions_set_holds_at_least_150_cases():
    assert len(CASES) >= 150 and all(len(case) == 3 for case in CASES)


@pytest.mark.parametrize("source, translation, expected", CASES, ids=[case[0][:40] for case in CASES])
def test_each_line_of_the_conventions_set_comes_out_as_french_writes_it(source, translation, expected):
    assert rendered(source, translation, FR) == written(expected)


@pytest.mark.parametrize("source, translation, expected", CASES, ids=[case[0][:40] for case in CASES])
def test_typography_none_leaves_the_model_s_text_as_it_is(source, translation, expected):
    assert rendered(source, translation, Typography("none")) == translation


def test_fr_ca_puts_no_space_before_semicolons_and_marks_and_fr_a_narrow_one():
    text = 'Il a dit: "Vraiment?" Oui; non!'
    assert punctuate(text, FR) == f"Il a dit{NBSP}: «{NBSP}Vraiment{NNBSP}?{NBSP}» Oui{NNBSP}; non{NNBSP}!"
    assert punctuate(text, Typography("fr-CA")) == f"Il a dit{NBSP}: «{NBSP}Vraiment?{NBSP}» Oui; non!"
    assert rendered("1,500 people.", "1,500 personnes.", Typography("fr-CA")) == f"1{NBSP}500 personnes."


def test_apostrophes_are_kept_straight_or_curly_as_chosen_but_never_changed_inside_links_or_code():
    text = "L’homme d'affaires voit https://example.com/l'a et `it's`."
    assert punctuate(text, FR) == text
    assert punctuate(text, Typography("fr", apostrophe="straight")) == \
        "L'homme d'affaires voit https://example.com/l'a et `it's`."
    curly = Typography("fr", apostrophe="curly")
    assert punctuate(text, curly) == "L’homme d’affaires voit https://example.com/l'a et `it's`."
    assert rendered("x", "Le ordinateur.", curly) == "L’ordinateur."


def test_a_setting_that_does_not_exist_is_refused():
    with pytest.raises(ValueError, match="typography"):
        Typography("fr-BE")
    with pytest.raises(ValueError, match="apostrophe"):
        Typography("fr", apostrophe="round")


def test_a_doctor_and_their_name_are_one_placeholder_that_comes_back_in_french_where_the_model_left_it():
    from nmt.text.conventions import english_titles
    from nmt.text.protect import protect
    from nmt.text.segment import split_sentences

    protected = protect("Dr. Smith is here.", titles=True)
    assert protected.text == "⦅1⦆ is here." and protected.originals == ("le Dr Smith",)
    # the model never sees "Dr." to take it for a word; its placeholder kept, or dropped and put back where it stood
    for model_wrote in ("⦅1⦆ est ici.", "est ici."):
        assert render_sentence("Dr. Smith is here.", protected.restore(model_wrote), FR) == "Le Dr Smith est ici."
    assert protect("Prof. Martin teaches.", titles=True).originals == ("le professeur Martin",)
    assert protect("Dr. Smith is here.").text == "Dr. Smith is here."  # typography none: as before
    assert split_sentences(english_titles("Mr. Brown and Mrs. Green met Ms. White.")) == [
        "Mr Brown and Mrs Green met Mrs White."]
    assert protect("Mrs White came.", names=lambda word: False).text == "Mrs ⦅1⦆ came."  # a name, though a word


def test_a_date_in_digits_goes_to_the_model_day_first_where_its_day_shows_its_order():
    from nmt.text.conventions import dates_of_unknown_order, day_first_dates

    assert day_first_dates("Due 12/25/2024 or 3/15/24.") == "Due 25/12/2024 or 15/3/24."
    for unchanged in ("Due 25/12/2024.", "Due 05/12/2024.", "See https://x.org/12/25/2024/post", "Score 3/4."):
        assert day_first_dates(unchanged) == unchanged
    assert dates_of_unknown_order("From 05/12/2024 to 12/25/2024, or 25/12/2024, or 4/4/2024.") == ["05/12/2024"]


def test_an_abbreviated_month_of_a_date_goes_to_the_model_written_out():
    # "The store closes at noon on Dec. 24." came out "Le magasin ferme au 24 décembre.": "at noon" lost
    from nmt.text.conventions import english_months

    assert english_months("Closed at noon on Dec. 24.") == "Closed at noon on December 24."
    assert english_months("From Sept 3rd to Oct. 2, 2025.") == "From September 3rd to October 2, 2025."
    assert english_months("Due 24 Dec. 2025, or on 3 Jan.") == "Due 24 December 2025, or on 3 January."
    assert english_months("Due on 24 Dec. The rest later.") == "Due on 24 December. The rest later."
    for unchanged in ("He did it in Dec.", "Mar 10.5 volts", "Apr 3:30", "Jan Smith, 24"):
        assert english_months(unchanged) == unchanged


def test_a_schedule_s_ranges_and_abbreviated_days_go_to_the_model_written_out():
    # "Mon–Fri, 9 am–5 pm" came out "Mono-Fri", "Monday–Friday" "Lundi" (Friday lost), "closed Sun." "fermé le soleil"
    from nmt.text.conventions import english_days_and_hours

    assert english_days_and_hours("Mon–Fri, 9 am–5 pm") == "Monday to Friday, from 9 am to 5 pm"
    assert english_days_and_hours("Open Mon.-Sat. 10:00-18:00, closed Sun. Call us.") == \
        "Open Monday to Saturday from 10:00 to 18:00, closed Sunday. Call us."
    assert english_days_and_hours("The meeting is on Tue., March 4.") == "The meeting is on Tuesday, March 4."
    assert english_days_and_hours("Wed 12/3 at 9am") == "Wednesday 12/3 at 9am"
    assert english_days_and_hours("We met between 9am-11am, at 3:15-3:45.") == \
        "We met between 9am and 11am, from 3:15 to 3:45."
    for unchanged in ("He sat down on Sun Street.", "The Sun rose. Sat on it.", "I wed her in June.",
                      "It ended 2-1.", "Call 555-1234.", "The 9-5 grind", "Monday to Friday, 9 am to 5 pm",
                      "Read John 3:16-18."):
        assert english_days_and_hours(unchanged) == unchanged


def test_ranges_of_counts_and_amounts_go_to_the_model_with_to():
    # "It takes 5–10 minutes." came out "Cela prend 510 minutes.", "$10–$20" "10 $ 20 $", "$5-10 million"
    # "5 $ à 10 millions de dollars" (five dollars)
    from nmt.text.conventions import english_ranges

    assert english_ranges("It takes 5–10 minutes.") == "It takes 5 to 10 minutes."
    assert english_ranges("Tickets cost $10–$20, rooms €80-120.") == "Tickets cost $10 to $20, rooms €80 to €120."
    assert english_ranges("$1,000-2,000 a month") == "$1,000 to $2,000 a month"
    assert english_ranges("a $5-10 million deal, £3–4m paid, €1.5-2bn of sales") == \
        "a 5 to 10 million dollars deal, 3 to 4 million pounds paid, 1.5 to 2 billion euros of sales"
    for unchanged in ("They won 3-1 at home.", "a 1-2 defeat", "Call 555-1234.", "The 2020–2024 plan",
                      "It ended 2-1.", "Read John 3:16-18."):
        assert english_ranges(unchanged) == unchanged


def test_amounts_in_thousands_go_to_the_model_written_out():
    # "The salary is $85k a year." came out "Le salaire est de 85 dollars par an."
    from nmt.text.conventions import english_ranges, english_thousands

    assert english_thousands("The salary is $85k a year.") == "The salary is $85,000 a year."
    assert english_thousands("He raised €1.5K, then £2.25k and $0.5k.") == "He raised €1,500, then £2,250 and $500."
    assert english_ranges(english_thousands("Salaries range from $50k-70k, bonuses €2.5k–€3k.")) == \
        "Salaries range from $50,000 to $70,000, bonuses €2,500 to €3,000."
    for unchanged in ("a 5k run", "a $5k-a-year job", "$85km", "$1,5k", "10k users"):
        assert english_thousands(unchanged) == unchanged


def test_a_reduction_in_price_goes_to_the_model_as_a_discount():
    # "Up to 50% off all items!" came out "Jusqu'à 50 % de tous les éléments !" (a share), "Get $10 off orders"
    # "Descendez 10 $ ordres" (a motion)
    from nmt.text.conventions import english_discounts

    assert english_discounts("Up to 50% off all items!") == "Up to a 50% discount on all items!"
    assert english_discounts("Get $10 off orders over $50.") == "Get a $10 discount on orders over $50."
    assert english_discounts("30% off everything this weekend.") == "A 30% discount on everything this weekend."
    assert english_discounts("All shoes are 30% off this week.") == "All shoes are reduced by 30% this week."
    assert english_discounts("Take extra 10% off at checkout. Enjoy 11% off") == \
        "Take an extra 10% discount at checkout. Enjoy an 11% discount"
    assert english_discounts("Take the 25 percent off now") == "Take the 25 percent discount now"
    for unchanged in ("Shares were trading 5% off their peak.", "The stock is 20% off its high.",
                      "the 50% off-peak rate", "Turn 2 off.", "Switch off 50% of the lights.",
                      "a proposal to slash 20% off the budget", "carve another 10 to 30 % off what is left",
                      "10-30% off"):
        assert english_discounts(unchanged) == unchanged


def test_abbreviated_units_and_words_go_to_the_model_written_out():
    # "Batteries last up to 10 hrs." came out "jusqu'à 10 hrs", "20 mins" "20 mins", "after 500 m" "après 500
    # millions", "approx. 300 euros" "approximative. 300 euros"
    from nmt.text.conventions import english_short_forms

    assert english_short_forms("Batteries last up to 10 hrs.") == "Batteries last up to 10 hours."
    assert english_short_forms("Takes 1 hr, maybe 2 hrs. Then 30 secs!") == \
        "Takes 1 hour, maybe 2 hours. Then 30 seconds!"
    assert english_short_forms("10 hrs. per day, 5mins each") == "10 hours per day, 5 minutes each"
    assert english_short_forms("Turn left after 500 m, then 1 m.") == "Turn left after 500 meters, then 1 meter."
    assert english_short_forms("Snacks, e.g. nuts, approx. 3 kg; France vs. Spain") == \
        "Snacks, for example nuts, approximately 3 kg; France against Spain"
    for unchanged in ("The HRS team", "5 min", "He hrs 5", "10 mins2", "It cost $5 m.", "It cost £5 m.",
                      "Some 5 m people voted.", "A 5 mm screw",
                      "Kick-off (20.45 hrs)", "At 1400 hrs.", "Roe v. Wade", "see fig. 3"):
        assert english_short_forms(unchanged) == unchanged


def test_country_abbreviations_go_to_the_model_without_periods_a_sentence_s_own_period_kept():
    # "U.K." came out "l'ONU" and "U.N." "les États-Unis"; "UK" and "UN" come out right
    from nmt.text.conventions import english_abbreviations

    assert english_abbreviations("The U.S.A. and the U.N. agreed.") == "The USA and the UN agreed."
    assert english_abbreviations("The U.K. Parliament voted.") == "The UK Parliament voted."
    assert english_abbreviations("The U.S., the U.K., and the E.U. signed.") == "The US, the UK, and the EU signed."
    assert english_abbreviations("He lives in the U.K.") == "He lives in the UK."
    assert english_abbreviations("He moved to the U.K. She stayed.") == "He moved to the UK. She stayed."
    assert english_abbreviations("J.R.R. Tolkien, A.U.K. Ltd") == "J.R.R. Tolkien, A.U.K. Ltd"  # not these


def test_a_couple_goes_to_the_model_as_two_people_and_comes_back_as_french_writes_it():
    from nmt.text.conventions import english_titles
    from nmt.text.names import kept_couples
    from nmt.text.protect import protect

    for english in ("Mr. and Mrs. Brown live here.", "Mr and Mrs Brown live here.", "Mr. & Mrs. Brown live here."):
        assert english_titles(english) == "Mr Brown and Mrs Brown live here."
    assert english_titles("Mr. and Mrs. John Smith came.") == "Mr John Smith and Mrs John Smith came."
    assert english_titles("Mr. and Mrs. are titles.") == "Mr. and Mrs. are titles."  # no name after them
    source = "Mr Brown and Mrs Brown live here."
    for model_wrote, french in (("M. Brown et Mme Brown vivent ici.", "M. et Mme Brown vivent ici."),
                                ("J'ai écrit à M. Brown et à Mme Brown.", "J'ai écrit à M. et Mme Brown."),
                                ("Le chien de M. Brown et de Mme Brown.", "Le chien de M. et Mme Brown."),
                                ("M. Brown et Mme Green.", "M. Brown et Mme Green.")):  # two names: two people
        assert render_sentence(source, model_wrote, FR) == french
    # a translation that lost Mrs ("MM. Smith et Smith", a model's) is retried; the retry's couple, not written
    # out, is one placeholder that comes back in French
    assert not kept_couples(source, "MM. Brown et Brown vivent ici.")
    assert kept_couples(source, "M. et Mme Brown vivent ici.") and kept_couples("A dog runs.", "Un chien court.")
    retried = protect(english_titles("Mr. and Mrs. Brown live here.", couples=False), titles=True)
    assert retried.text == "⦅1⦆ live here." and retried.originals == ("M. et Mme Brown",)


def test_a_name_after_a_title_is_protected_but_not_an_office_nor_a_possessive():
    from nmt.text.names import titled_name_spans

    def names(text):
        return [text[start:end] for start, end in titled_name_spans(text)]

    assert names("Mrs White met Mr Brown Jr and Mrs O'Brien.") == ["White", "Brown Jr", "O'Brien"]
    assert names("Mr President, Mr Commissioner, the General Affairs Council") == []  # Europarl's offices
    assert names("I object to Mr Posselt’s description.") == ["Posselt"]


def test_the_degree_sign_goes_to_the_model_with_its_number_not_behind_a_placeholder():
    from nmt.text.protect import protect

    assert protect("It dropped to -12°C.").text == "It dropped to -12°C."
    assert protect("© 2024 Acme ⭐").text == "⦅1⦆ 2024 Acme ⦅2⦆"  # pictures stay behind placeholders


def test_a_century_in_roman_numerals_reads_as_its_digits_for_the_checks_of_kept_numbers():
    from nmt.text.conventions import digit_centuries

    assert digit_centuries("Au XXIe siècle, après le XIXe siècle et le Ier siècle.") == \
        "Au 21e siècle, après le 19e siècle et le 1er siècle."
    assert digit_centuries("Le XVIIIe siècle, MCMXC, Xe") == "Le 18e siècle, MCMXC, Xe"
