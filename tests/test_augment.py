import random

from nmt.data.augment import Augment, augmented, shared_words, swap_shared, variants
from nmt.data.corpus import PairSource, ParallelText
from nmt.text.protect import PLACEHOLDER_PATTERN, entities

PAIRS = ParallelText(["Tom bought 3 apples in 1990.", "A dog runs on the beach.", "Mary is here."],
                     ["Tom a acheté 3 pommes en 1990.", "Un chien court sur la plage.", "Mary est ici."])


def test_shared_words_are_names_and_numbers_found_once_on_each_side():
    assert shared_words(PAIRS.source[0], PAIRS.target[0]) == ["Tom", "3", "1990"]
    assert shared_words(PAIRS.source[1], PAIRS.target[1]) == []  # "A" / "Un": nothing shared


def test_a_swap_puts_the_same_entity_or_placeholder_on_both_sides():
    rng = random.Random(0)
    for _ in range(200):
        source, target = swap_shared(PAIRS.source[0], PAIRS.target[0], rng)
        assert "Tom" not in source and "Tom" not in target and "apples" in source and "pommes" in target
        placeholders = PLACEHOLDER_PATTERN.findall(source)
        assert placeholders == PLACEHOLDER_PATTERN.findall(target)
        kept, numbers = entities(source)
        assert all(entity in target for entity in kept)  # URLs, codes, e-mails, emoji: verbatim in French


def test_variants_are_capitals_title_case_swaps_emoji_and_joins_drawn_from_a_seed():
    options = Augment(upper=1.0, title=1.0, swap=1.0, emoji=1.0, join=1.0)
    out = variants(PAIRS, options, random.Random(3))
    pairs = list(zip(out.source, out.target, strict=True))
    assert ("TOM BOUGHT 3 APPLES IN 1990.", "TOM A ACHETÉ 3 POMMES EN 1990.") in pairs
    assert {("A Dog Runs On The Beach.", "Un chien court sur la plage."),
            ("A Dog Runs on the Beach.", "Un chien court sur la plage.")} & set(pairs)
    assert any(source.startswith(PAIRS.source[1] + " ") and target.startswith(PAIRS.target[1] + " ")
               for source, target in pairs)  # joined with others
    assert out.source == variants(PAIRS, options, random.Random(3)).source
    assert sum(variants(PAIRS, Augment(), random.Random(seed)).source != [] for seed in range(20)) > 0


def test_an_augmented_source_keeps_every_pair_and_names_its_variants_in_its_identity():
    source = PairSource("corpus", lambda size: iter([PAIRS]), None)
    chunk = next(augmented(source, Augment(swap=1.0)).chunks(100))
    assert chunk.source[:3] == PAIRS.source and chunk.target[:3] == PAIRS.target and len(chunk) > 3
    assert augmented(source, Augment()).identity != source.identity
    assert augmented(source, Augment()).identity != augmented(source, Augment(seed=2)).identity


def test_no_generated_name_or_address_word_is_in_the_robustness_sets():
    """The sets must measure copying, not memory: no word the augmentation draws names from is a word of
    their sources, and no word it builds links and addresses from is a word of theirs."""
    import re

    from nmt.apps.robustness import load_robustness
    from nmt.data.augment import FIRST_NAMES, SURNAMES, WORDS
    from nmt.text.protect import EMAIL, URL

    sources = [line.source for split in ("dev", "test") for line in load_robustness(split)]
    names = {word.lower() for name in FIRST_NAMES + SURNAMES for word in re.split(r"[\s-]+", name)}
    words = {word.lower() for source in sources for word in re.findall(r"[^\W\d_]+", source)}
    assert not names & words, sorted(names & words)
    addresses = {label for source in sources for found in (*URL.findall(source), *EMAIL.findall(source))
                 for label in re.findall(r"[a-z]+", found.lower())}
    assert addresses and not set(WORDS) & addresses, sorted(set(WORDS) & addresses)


def test_augment_swap_sets_the_share_of_swapped_variants_and_names_it_in_the_identity(tmp_path):
    import pytest

    from nmt.data.sources import DataSpec, training_source
    from nmt.errors import DataError

    never = Augment(upper=0, title=0, heading=0, swap=0.0, emoji=0, join=0)
    assert variants(PAIRS, never, random.Random(1)).source == []
    always = Augment(upper=0, title=0, heading=0, swap=1.0, emoji=0, join=0)
    assert len(variants(PAIRS, always, random.Random(1)).source) == 2  # the pairs with Tom and Mary
    (tmp_path / "a.en").write_text("Tom bought 3 apples in 1990.\n")
    (tmp_path / "a.fr").write_text("Tom a acheté 3 pommes en 1990.\n")
    files = {"src_file": str(tmp_path / "a.en"), "tgt_file": str(tmp_path / "a.fr"), "augment": True}
    identities = {training_source(DataSpec(**files, augment_swap=share)).identity for share in (None, 0.25, 1.0)}
    assert len(identities) == 2  # None is the default share, 1
    with pytest.raises(DataError, match="--augment-swap is a share between 0 and 1"):
        training_source(DataSpec(**files, augment_swap=1.5))
