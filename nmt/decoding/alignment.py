"""Where the model looked: cross-attention weights of a translation, word alignments drawn from them, and
the heatmap textbooks on attention draw.

    weights = cross_attention(model, source_ids, target_ids)     # (layers, heads, T+1, S+1), EOS included
    word_alignment(weights[layer].mean(0), source_pieces, target_pieces)   ->  [(0, 0), (1, 2), ...]
    draw_attention(weights, source_pieces, target_pieces, "heat.png", layer=2)

The weights are recomputed by teacher forcing the translation through the model (`Transformer.forward`),
each decoder layer's cross-attention read through a forward hook: softmax(q k^T / sqrt(Dh)) over the
source positions, per head. Alignments are Pharaoh "i-j" pairs over whitespace words (source word i,
target word j): each target word is linked to the source word its pieces attend to most, summed over the
pieces of each word, in the layer ALIGNMENT_LAYER counts from the top.
"""

from __future__ import annotations

import math
from pathlib import Path

import torch
from torch import Tensor

from nmt.errors import UsageError
from nmt.model.transformer import Transformer

# Which decoder layer's attention aligns words, counted from the last (1: the last layer). Chosen on
# multi30k:valid by how often a target word found once, unchanged, in the source (names, numbers) is
# linked to it, where the last two layers of the shipped model were close and the first far behind:
# benchmarks/ALIGNMENT.md.
ALIGNMENT_LAYER = 1


@torch.inference_mode()
def cross_attention(model: Transformer, source: list[int], target: list[int]) -> Tensor:
    """Cross-attention weights (L, H, T+1, S+1) of `target` (its pieces, then EOS; each row a target
    position) over `source` (its pieces, then EOS), one sentence, teacher-forced."""
    config = model.config
    src = torch.tensor([[*source, config.eos_id]])
    tgt_in = torch.tensor([[config.bos_id, *target]])
    captured: list[Tensor] = []

    def capture(module, args, output):
        x, keys = args[0], args[1]  # (1, T, D), (1, H, S, Dh)
        batch, length, d_model = x.shape
        q = module.q_proj(x).view(batch, length, module.n_heads, d_model // module.n_heads).transpose(1, 2)
        captured.append((q @ keys.transpose(-2, -1) / math.sqrt(q.size(-1))).softmax(dim=-1)[0].float())

    hooks = [layer.cross_attn.register_forward_hook(capture) for layer in model.decoder_layers]
    try:
        model.eval()(src.to(next(model.parameters()).device), tgt_in.to(next(model.parameters()).device))
    finally:
        for hook in hooks:
            hook.remove()
    return torch.stack(captured).cpu()  # (L, H, T+1, S+1)


def word_starts(pieces: list[str]) -> list[int]:
    """The word index of each sentencepiece piece (a piece starting with ▁ starts a word)."""
    index, words = -1, []
    for piece in pieces:
        if piece.startswith("\u2581") or index < 0:
            index += 1
        words.append(index)
    return words


def word_alignment(weights: Tensor, source_pieces: list[str], target_pieces: list[str]) -> list[tuple[int, int]]:
    """Pharaoh pairs (source word, target word) from one layer's head-averaged weights (T+1, S+1): each
    target word linked to the source word with the most attention, summed over both words' pieces (EOS
    rows and columns left out)."""
    source_words, target_words = word_starts(source_pieces), word_starts(target_pieces)
    if not source_words or not target_words:
        return []
    pieces = weights[: len(target_pieces), : len(source_pieces)]
    by_source = torch.zeros(len(target_pieces), source_words[-1] + 1).index_add_(
        1, torch.tensor(source_words), pieces)  # (T, source words)
    by_word = torch.zeros(target_words[-1] + 1, by_source.size(1)).index_add_(0, torch.tensor(target_words), by_source)
    return [(int(best), word) for word, best in enumerate(by_word.argmax(dim=1).tolist())]


def align(model: Transformer, tokenizer, source: str, translation: str) -> list[tuple[int, int]]:
    """Pharaoh pairs between the whitespace words of `source` and of its `translation`, from the heads'
    mean of the ALIGNMENT_LAYER-th decoder layer from the top; [] for an empty side or a pair too long for
    the model's positions."""
    source_ids, target_ids = tokenizer.encode(source), tokenizer.encode(translation)
    if not source_ids or not target_ids or max(len(source_ids), len(target_ids)) >= model.config.max_positions:
        return []
    weights = cross_attention(model, source_ids, target_ids)[-ALIGNMENT_LAYER].mean(dim=0)
    pieces = tokenizer.processor.id_to_piece
    return word_alignment(weights, [pieces(i) for i in source_ids], [pieces(i) for i in target_ids])


def draw_attention(weights: Tensor, source_pieces: list[str], target_pieces: list[str], out: str | Path,
                   layer: int, head: int | None = None, grid: bool = False) -> Path:
    """A heatmap of `layer`'s cross-attention (1-based): one head, the heads' mean, or (grid) every head;
    source pieces along the top, target pieces down the side, EOS included."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise UsageError("nmt attention needs matplotlib: pip install 'nmt-transformer[plot]'") from None
    layers, heads = weights.shape[:2]
    if not 1 <= layer <= layers:
        raise UsageError(f"--layer must be between 1 and {layers}")
    if head is not None and not 1 <= head <= heads:
        raise UsageError(f"--head must be between 1 and {heads}")
    columns, rows = [*source_pieces, "</s>"], [*target_pieces, "</s>"]
    panels = [(f"head {h + 1}", weights[layer - 1, h]) for h in range(heads)] if grid else [
        (f"head {head}" if head else "mean of the heads", weights[layer - 1, head - 1] if head else
         weights[layer - 1].mean(dim=0))]
    size = (0.35 * len(columns) + 1.5, 0.3 * len(rows) + 1.5)
    figure, axes = plt.subplots(1, len(panels), figsize=(size[0] * len(panels), size[1]), squeeze=False)
    for axis, (title, panel) in zip(axes[0], panels, strict=True):
        axis.imshow(panel.numpy(), cmap="Greys", vmin=0.0, vmax=1.0, aspect="auto")
        axis.set_xticks(range(len(columns)), columns, rotation=90)
        axis.set_yticks(range(len(rows)), rows if axis is axes[0][0] else [""] * len(rows))
        axis.xaxis.tick_top()
        axis.set_title(f"decoder layer {layer}, {title}", pad=12 + 5 * max(map(len, columns)))
    figure.tight_layout()
    out = Path(out)
    figure.savefig(out, dpi=100)
    plt.close(figure)
    return out
