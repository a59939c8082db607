"""The sentencepiece tokenizer (nmt.text.tokenizer)."""


def test_text_round_trips_and_broken_utf8_from_a_model_is_left_out(tokenizer):
    text = "A “quoted” dog runs. 😀"
    assert tokenizer.decode(tokenizer.encode(text)) == text  # rare characters go through byte pieces
    byte = tokenizer.processor.piece_to_id("<0xE2>")  # the first byte of “ without the two after it
    words = tokenizer.encode("A dog") + [byte] + tokenizer.encode(" runs.")
    assert tokenizer.decode(words) == "A dog runs."
