"""Export a checkpoint to other engines. CTranslate2: a model directory built with its Transformer spec
API from our weights, plus the sentencepiece model beside it.

    export_ctranslate2(load_checkpoint("model.pt"), "model-ct2", quantization="int8")

Then, with ctranslate2 and sentencepiece alone:
    sp = sentencepiece.SentencePieceProcessor(model_file="model-ct2/sentencepiece.model")
    translator = ctranslate2.Translator("model-ct2")
    result = translator.translate_batch([sp.encode("A dog runs.", out_type=str)])
    sp.decode(result[0].hypotheses[0])
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np

from nmt.errors import UsageError
from nmt.model.checkpoint import Checkpoint
from nmt.model.transformer import sinusoidal_table

LAYER_NORM_EPS = 1e-5  # torch.nn.LayerNorm's default


def _linear(spec, weights: dict, *names: str) -> None:
    """Fill a CTranslate2 linear spec, fusing several of our projections (e.g. Q with KV) along outputs."""
    spec.weight = np.concatenate([weights[f"{n}.weight"] for n in names])
    spec.bias = np.concatenate([weights[f"{n}.bias"] for n in names])


def _norm(spec, weights: dict, name: str) -> None:
    spec.gamma, spec.beta = weights[f"{name}.weight"], weights[f"{name}.bias"]


def _ffn(spec, weights: dict, layer: str) -> None:
    _linear(spec.linear_0, weights, f"{layer}.ffn.up")
    _linear(spec.linear_1, weights, f"{layer}.ffn.down")
    _norm(spec.layer_norm, weights, f"{layer}.ffn_sublayer.norm")


def build_ctranslate2_spec(checkpoint: Checkpoint, pieces: list[str] | None = None):
    """The CTranslate2 TransformerSpec of a checkpoint; `pieces` (the vocabulary, by id) default to its
    sentencepiece model's."""
    try:
        from ctranslate2.specs import transformer_spec
    except ImportError:
        raise UsageError("export to CTranslate2 needs it: pip install 'nmt-transformer[ctranslate2]'") from None
    config = checkpoint.config
    weights = {name: t.float().numpy() for name, t in checkpoint.weights.items()}
    spec = transformer_spec.TransformerSpec.from_config(
        (config.n_encoder_layers, config.n_decoder_layers), config.n_heads, pre_norm=config.pre_norm)
    # CTranslate2's own sinusoidal table puts sines and cosines in two halves; ours interleaves them.
    positions = sinusoidal_table(config.max_positions, config.d_model).numpy()
    embedding = weights["embed.weight"]
    for part in (spec.encoder, spec.decoder):
        part.scale_embeddings = True
        part.position_encodings.encodings = positions
    spec.encoder.embeddings[0].weight = embedding
    spec.decoder.embeddings.weight = embedding
    spec.decoder.projection.weight = embedding if config.tie_embeddings else weights["output_proj.weight"]
    for i, layer in enumerate(spec.encoder.layer):
        scope = f"encoder_layers.{i}"
        _linear(layer.self_attention.linear[0], weights, f"{scope}.self_attn.q_proj", f"{scope}.self_attn.kv_proj")
        _linear(layer.self_attention.linear[1], weights, f"{scope}.self_attn.out_proj")
        _norm(layer.self_attention.layer_norm, weights, f"{scope}.attn_sublayer.norm")
        _ffn(layer.ffn, weights, scope)
    for i, layer in enumerate(spec.decoder.layer):
        scope = f"decoder_layers.{i}"
        _linear(layer.self_attention.linear[0], weights, f"{scope}.self_attn.q_proj", f"{scope}.self_attn.kv_proj")
        _linear(layer.self_attention.linear[1], weights, f"{scope}.self_attn.out_proj")
        _norm(layer.self_attention.layer_norm, weights, f"{scope}.self_sublayer.norm")
        _linear(layer.attention.linear[0], weights, f"{scope}.cross_attn.q_proj")
        _linear(layer.attention.linear[1], weights, f"{scope}.cross_attn.kv_proj")
        _linear(layer.attention.linear[2], weights, f"{scope}.cross_attn.out_proj")
        _norm(layer.attention.layer_norm, weights, f"{scope}.cross_sublayer.norm")
        _ffn(layer.ffn, weights, scope)
    if config.pre_norm:
        _norm(spec.encoder.layer_norm, weights, "encoder_norm")
        _norm(spec.decoder.layer_norm, weights, "decoder_norm")
    if pieces is None:
        processor = checkpoint.tokenizer().processor
        pieces = [processor.id_to_piece(i) for i in range(processor.get_piece_size())]
    spec.register_source_vocabulary(pieces)
    spec.register_target_vocabulary(pieces)
    spec.config.add_source_eos = True  # our sources end with EOS
    spec.config.unk_token, spec.config.bos_token, spec.config.eos_token = (
        pieces[config.unk_id], pieces[config.bos_id], pieces[config.eos_id])
    spec.config.decoder_start_token = pieces[config.bos_id]
    spec.config.layer_norm_epsilon = LAYER_NORM_EPS
    return spec


def export_ctranslate2(checkpoint: Checkpoint, out: str | Path, quantization: str | None = None,
                       pieces: list[str] | None = None) -> Path:
    """Write a CTranslate2 model directory with `sentencepiece.model` beside the weights (`pieces`: as in
    build_ctranslate2_spec)."""
    out = Path(out)
    spec = build_ctranslate2_spec(checkpoint, pieces)
    spec.validate()
    spec.optimize(quantization=quantization)
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    spec.save(str(out))
    (out / "sentencepiece.model").write_bytes(checkpoint.spm_model)
    if checkpoint.shortlist is not None:
        processor = checkpoint.tokenizer().processor
        write_vmap(checkpoint.shortlist, out / "vmap.txt",
                   pieces or [processor.id_to_piece(i) for i in range(processor.get_piece_size())])
    return out


def write_vmap(shortlist, path: Path, pieces: list[str]) -> None:
    """The shortlist as CTranslate2's vocabulary map (translate_batch(..., use_vmap=True)): a first line with
    an empty source holding the tokens every sentence is decoded over, then for each source piece, a tab,
    its target pieces, itself included (nmt copies a sentence's own source tokens too). CTranslate2 decodes a
    batch over the union of its sentences' entries, where nmt decodes each sentence over its own."""
    shared = shortlist.shared_ids.tolist()
    lines = ["\t" + " ".join(pieces[i] for i in shared)]
    for source, targets in enumerate(shortlist.table.tolist()):
        if pieces[source] and not {" ", "\t"} & set(pieces[source]):  # the map's separators cannot be in a key
            lines.append(pieces[source] + "\t" + " ".join(pieces[i] for i in dict.fromkeys([source, *targets])))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
