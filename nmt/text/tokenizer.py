"""Subword tokenization with sentencepiece: one joint English+French model, ids fixed for the Transformer.

    tokenizer = Tokenizer(model_bytes)          # the bytes stored in every checkpoint
    ids = tokenizer.encode("A dog runs.")       # no BOS/EOS: the caller adds them
    text = tokenizer.decode(ids)
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterable

import sentencepiece as spm

from nmt.errors import DataError
from nmt.text.protect import PLACEHOLDERS

PAD_ID, UNK_ID, BOS_ID, EOS_ID = 0, 1, 2, 3
# A lone surrogate: JSON can write one ("\\ud800"), UTF-8 cannot, and sentencepiece refuses it
SURROGATE = re.compile("[\ud800-\udfff]")


def without_surrogates(text: str) -> str:
    """`text` with each lone surrogate replaced by U+FFFD."""
    return SURROGATE.sub("\ufffd", text)
# A register tag (nmt.data.register) is written in training text as a mark opening the English side, a character
# of Unicode's private use area, and encoded as one id: that of a byte piece no UTF-8 text holds (bytes F8-FF
# never occur in it), so every sentencepiece model with byte fallback has its tags already, and no text a user
# types can give them.
REGISTER_MARKS = {"formal": "\ue0f0", "informal": "\ue0f1"}
REGISTER_PIECES = {"\ue0f0": "<0xFE>", "\ue0f1": "<0xFF>"}


class Tokenizer:
    def __init__(self, model_bytes: bytes):
        self.model_bytes = bytes(model_bytes)
        self.processor = spm.SentencePieceProcessor(model_proto=self.model_bytes)

    @property
    def vocab_size(self) -> int:
        return self.processor.get_piece_size()

    def encode(self, text: str) -> list[int]:
        """The ids of `text`; a register mark opening it (REGISTER_MARKS) is its tag's one id; a lone surrogate
        is U+FFFD's."""
        text = without_surrogates(text)
        if text[:1] in REGISTER_PIECES:
            return [self.register_id(text[0])] + self.processor.encode(text[1:])
        return self.processor.encode(text)

    def encode_batch(self, texts: list[str]) -> list[list[int]]:
        texts = [without_surrogates(text) for text in texts]
        if not any(text[:1] in REGISTER_PIECES for text in texts):
            return self.processor.encode(texts)
        ids = self.processor.encode([text[1:] if text[:1] in REGISTER_PIECES else text for text in texts])
        return [[self.register_id(text[0])] + row if text[:1] in REGISTER_PIECES else row
                for text, row in zip(texts, ids, strict=True)]

    def register_id(self, mark: str) -> int:
        piece = self.processor.piece_to_id(REGISTER_PIECES[mark])
        if piece == UNK_ID:
            raise DataError("this sentencepiece model has no byte pieces (trained without byte fallback): it cannot "
                            "hold register tags")
        return piece

    def decode(self, ids: list[int]) -> str:
        """The text of `ids`; byte pieces that make no character (a model's broken UTF-8) are left out, not
        written as U+FFFD."""
        text = self.processor.decode(ids)
        if "\ufffd" in text:
            text = re.sub(" {2,}", " ", text.replace("\ufffd", "")).strip()
        return text

    @property
    def has_placeholders(self) -> bool:
        """Whether each placeholder of nmt.text.protect is one piece (sentencepiece models trained since they exist)."""
        return all(self.processor.piece_to_id(piece) != UNK_ID for piece in PLACEHOLDERS)


def train_tokenizer(sentences: Iterable[str], vocab_size: int, max_sentences: int = 2_000_000) -> Tokenizer:
    """A unigram model with byte fallback (emoji and unseen scripts survive as bytes), the ids above, and the
    placeholders of nmt.text.protect as pieces of their own."""
    model = io.BytesIO()
    try:
        spm.SentencePieceTrainer.train(
            sentence_iterator=iter(sentences),
            model_writer=model,
            vocab_size=vocab_size,
            model_type="unigram",
            character_coverage=0.9999,
            byte_fallback=True,
            user_defined_symbols=list(PLACEHOLDERS),
            pad_id=PAD_ID,
            unk_id=UNK_ID,
            bos_id=BOS_ID,
            eos_id=EOS_ID,
            input_sentence_size=max_sentences,
            shuffle_input_sentence=True,
            num_threads=2,
            minloglevel=2,
        )
    except RuntimeError as exc:  # sentencepiece's checks: no text, fewer pieces than characters, ...
        reason = str(exc).split("] ", 1)[-1].strip()
        raise DataError(f"cannot train the sentencepiece model: {reason or 'no text to train on'}") from None
    return Tokenizer(model.getvalue())
