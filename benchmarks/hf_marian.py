"""Our weights in HF transformers' MarianMT (same architecture: post-norm, scaled shared embeddings, tied
output, sinusoidal positions), so that `generate()` can be timed on the same model.

    model = to_marian(load_checkpoint("data/models/en-fr.pt"))
    model.generate(input_ids, attention_mask=mask, num_beams=4, max_new_tokens=...)
    hf_generate(model, tokenizer, lines, beam=4, batch=32, lenpen=1.0, eos=3)   # translated lines
"""

from __future__ import annotations

import torch

from nmt.model.checkpoint import Checkpoint
from nmt.model.transformer import sinusoidal_table


def to_marian(checkpoint: Checkpoint):
    from transformers import MarianConfig, MarianMTModel

    c = checkpoint.config
    config = MarianConfig(
        vocab_size=c.vocab_size, decoder_vocab_size=c.vocab_size, d_model=c.d_model,
        encoder_layers=c.n_encoder_layers, decoder_layers=c.n_decoder_layers,
        encoder_attention_heads=c.n_heads, decoder_attention_heads=c.n_heads,
        encoder_ffn_dim=c.d_ff, decoder_ffn_dim=c.d_ff, activation_function="relu",
        max_position_embeddings=c.max_positions, scale_embedding=True, dropout=0.0, attention_dropout=0.0,
        activation_dropout=0.0, pad_token_id=c.pad_id, eos_token_id=c.eos_id, bos_token_id=c.bos_id,
        decoder_start_token_id=c.bos_id, forced_eos_token_id=None, share_encoder_decoder_embeddings=True,
        tie_word_embeddings=True,
    )
    model = MarianMTModel(config).eval()
    w = {k: v.float() for k, v in checkpoint.weights.items()}
    d = c.d_model
    target = {"model.shared.weight": w["embed.weight"]}
    positions = sinusoidal_table(c.max_positions, d)  # ours interleaves sin/cos; Marian's own uses halves
    for part in ("encoder", "decoder"):
        target[f"model.{part}.embed_positions.weight"] = positions
        target[f"model.{part}.embed_tokens.weight"] = w["embed.weight"]
    for part, ours, attentions in (("encoder", "encoder_layers", [("self_attn", "self_attn", "attn_sublayer")]),
                                   ("decoder", "decoder_layers", [("self_attn", "self_attn", "self_sublayer"),
                                                                  ("encoder_attn", "cross_attn", "cross_sublayer")])):
        for i in range(len(getattr(model.model, part).layers)):
            theirs, mine = f"model.{part}.layers.{i}", f"{ours}.{i}"
            for their_name, our_name, sublayer in attentions:
                k, v = w[f"{mine}.{our_name}.kv_proj.weight"].split(d), w[f"{mine}.{our_name}.kv_proj.bias"].split(d)
                for proj, weight, bias in (("q_proj", w[f"{mine}.{our_name}.q_proj.weight"],
                                            w[f"{mine}.{our_name}.q_proj.bias"]), ("k_proj", k[0], v[0]),
                                           ("v_proj", k[1], v[1]),
                                           ("out_proj", w[f"{mine}.{our_name}.out_proj.weight"],
                                            w[f"{mine}.{our_name}.out_proj.bias"])):
                    target[f"{theirs}.{their_name}.{proj}.weight"] = weight
                    target[f"{theirs}.{their_name}.{proj}.bias"] = bias
                norm = "self_attn_layer_norm" if their_name == "self_attn" else "encoder_attn_layer_norm"
                target[f"{theirs}.{norm}.weight"] = w[f"{mine}.{sublayer}.norm.weight"]
                target[f"{theirs}.{norm}.bias"] = w[f"{mine}.{sublayer}.norm.bias"]
            for their_fc, our_fc in (("fc1", "up"), ("fc2", "down")):
                target[f"{theirs}.{their_fc}.weight"] = w[f"{mine}.ffn.{our_fc}.weight"]
                target[f"{theirs}.{their_fc}.bias"] = w[f"{mine}.ffn.{our_fc}.bias"]
            target[f"{theirs}.final_layer_norm.weight"] = w[f"{mine}.ffn_sublayer.norm.weight"]
            target[f"{theirs}.final_layer_norm.bias"] = w[f"{mine}.ffn_sublayer.norm.bias"]
    state = model.state_dict()
    with torch.no_grad():
        for name, tensor in target.items():
            state[name].copy_(tensor)
        model.lm_head.weight.copy_(w["embed.weight"])
        model.final_logits_bias.zero_()
    return model


def hf_generate(model, tokenizer, sources: list[str], beam: int, batch: int, lenpen: float, eos: int) -> list[str]:
    """HF transformers generate() on the converted model (on its device), `batch` sentences at a time."""
    device = next(model.parameters()).device
    out = []
    for start in range(0, len(sources), batch):
        ids = [tokenizer.encode(line) + [eos] for line in sources[start : start + batch]]
        width = max(len(x) for x in ids)
        inputs = torch.tensor([x + [0] * (width - len(x)) for x in ids], device=device)
        generated = model.generate(inputs, attention_mask=(inputs != 0).long(), num_beams=beam, do_sample=False,
                                   length_penalty=lenpen, max_new_tokens=int(1.5 * width) + 10)
        out += [tokenizer.decode([t for t in row.tolist() if t > eos]) for row in generated]
    return out
