"""Model configuration: a frozen dataclass, stored in every checkpoint as a plain dict.

    config = ModelConfig.preset("small", vocab_size=8000)
    config.to_dict()  ->  {"vocab_size": 8000, "d_model": 256, ...}
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

PRESETS: dict[str, dict[str, int]] = {
    "tiny": dict(d_model=32, n_heads=2, d_ff=64, n_encoder_layers=2, n_decoder_layers=2),
    "small": dict(d_model=256, n_heads=4, d_ff=1024, n_encoder_layers=3, n_decoder_layers=3),
    "base": dict(d_model=512, n_heads=8, d_ff=2048, n_encoder_layers=6, n_decoder_layers=6),
    "big": dict(d_model=1024, n_heads=16, d_ff=4096, n_encoder_layers=6, n_decoder_layers=6),
}


@dataclass(frozen=True)
class ModelConfig:
    """Dimensions and switches of the Transformer. Special token ids follow `nmt.text.tokenizer`."""

    vocab_size: int
    d_model: int = 512
    n_heads: int = 8
    d_ff: int = 2048
    n_encoder_layers: int = 6
    n_decoder_layers: int = 6
    dropout: float = 0.1
    attention_dropout: float = 0.0
    max_positions: int = 1024
    pre_norm: bool = False  # the paper is post-norm: LayerNorm(x + sublayer(x))
    tie_embeddings: bool = True  # output projection shares the (joint) embedding matrix
    positional_encoding: bool = True  # off only to test permutation equivariance
    pad_id: int = 0
    unk_id: int = 1
    bos_id: int = 2
    eos_id: int = 3

    def __post_init__(self) -> None:
        for name in ("vocab_size", "d_model", "n_heads", "d_ff", "n_encoder_layers", "n_decoder_layers",
                     "max_positions"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a whole number of at least 1, not {value!r}")
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model {self.d_model} is not divisible by n_heads {self.n_heads}")
        if self.vocab_size <= max(self.pad_id, self.unk_id, self.bos_id, self.eos_id):
            raise ValueError(f"vocab_size {self.vocab_size} is too small for the special tokens")

    @classmethod
    def preset(cls, name: str, **overrides) -> ModelConfig:
        if name not in PRESETS:
            raise ValueError(f"unknown preset {name!r}; choose from {', '.join(PRESETS)}")
        return cls(**{**PRESETS[name], **overrides})

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, values: dict) -> ModelConfig:
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = set(values) - known
        if unknown:
            raise ValueError(f"unknown model config keys: {', '.join(sorted(unknown))}")
        return cls(**values)
