"""The chunked training loss (nmt.model.loss) against F.cross_entropy on the whole batch's logits."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from nmt.model import loss as loss_module
from nmt.model.loss import TranslationLoss
from tests.conftest import tiny_model

SRC = torch.tensor([[5, 6, 7, 3, 0], [8, 9, 10, 11, 3], [12, 3, 0, 0, 0]])
TGT_IN = torch.tensor([[2, 12, 13, 14], [2, 15, 16, 0], [2, 17, 0, 0]])
TGT_OUT = torch.tensor([[12, 13, 14, 3], [15, 16, 3, 0], [17, 3, 0, 0]])


def reference(model, smoothing):
    logits = model(SRC, TGT_IN).float()
    return F.cross_entropy(logits.view(-1, logits.size(-1)), TGT_OUT.view(-1), ignore_index=0,
                           label_smoothing=smoothing, reduction="sum")


@pytest.fixture(params=["kernel", "torch"])
def softmax_by(request, monkeypatch):
    """Each chunk's softmax and gradient by the C kernel train_cross_entropy (where the kernels build), and by
    torch's operators."""
    if request.param == "torch":
        monkeypatch.setattr(loss_module, "cross_entropy_kernel", lambda: None)
    elif loss_module.cross_entropy_kernel() is None:
        pytest.skip("the C kernels do not build here")
    return request.param


def gradients(model) -> dict[str, torch.Tensor]:
    return {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}


@pytest.mark.parametrize("tie_embeddings", [True, False])
@pytest.mark.parametrize("chunk", [4, 1024])  # several chunks, one chunk
def test_value_and_gradients_equal_cross_entropy_over_the_whole_batch(monkeypatch, softmax_by, tie_embeddings,
                                                                     chunk):
    monkeypatch.setattr(loss_module, "CHUNK_TOKENS", chunk)
    model = tiny_model(vocab_size=50, tie_embeddings=tie_embeddings).train()
    expected = reference(model, 0.1)
    expected.backward()
    expected_grads = gradients(model)
    model.zero_grad()
    found = TranslationLoss(model, label_smoothing=0.1)(SRC, TGT_IN, TGT_OUT)
    (2 * found).backward()  # the incoming gradient scales all of them
    assert torch.allclose(found, expected, atol=1e-4)
    grads = gradients(model)
    assert grads.keys() == expected_grads.keys()
    for name, grad in grads.items():
        assert torch.allclose(grad, 2 * expected_grads[name], atol=1e-5), name


def test_a_gpu_takes_chunks_as_large_as_its_logits_budget_a_cpu_its_own():
    on_gpu = torch.empty(1, 512, device="meta")  # any device but the CPU: what a CUDA tensor takes
    assert loss_module.chunk_tokens(on_gpu, 32000) == 4096  # 16 chunks of a 16,384-token micro-batch -> 4
    assert loss_module.chunk_tokens(on_gpu, 8000) == 16768
    assert loss_module.chunk_tokens(on_gpu, 1_000_000) == loss_module.CHUNK_TOKENS  # never below the CPU's
    assert loss_module.chunk_tokens(torch.empty(1, 512), 32000) == loss_module.CHUNK_TOKENS


def test_under_bf16_autocast_it_stays_close_to_the_reference(softmax_by):
    model = tiny_model(vocab_size=50).train()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        expected = reference(model, 0.1)
        found = TranslationLoss(model, label_smoothing=0.1)(SRC, TGT_IN, TGT_OUT)
    assert found.dtype == torch.float32
    assert torch.allclose(found, expected, rtol=2e-2)


@pytest.mark.parametrize("smoothing", [0.0, 0.1])
def test_without_gradients_it_gives_the_same_loss_a_chunk_at_a_time(monkeypatch, softmax_by, smoothing):
    """Validation's path (no autograd): the value of the training loss, chunk by chunk."""
    monkeypatch.setattr(loss_module, "CHUNK_TOKENS", 4)
    model = tiny_model(vocab_size=50).eval()
    with torch.no_grad():
        found = TranslationLoss(model, label_smoothing=smoothing)(SRC, TGT_IN, TGT_OUT)
        expected = reference(model, smoothing)
    torch.testing.assert_close(found, expected, atol=1e-4, rtol=1e-5)


def test_under_fp16_the_output_layer_gradient_keeps_small_probabilities():
    """fp16's gradients are formed in the forward pass, before backward brings the loss scale: softmax minus
    the target rounded to fp16 would flush every probability under 6e-8 to zero, and the rarely predicted
    pieces' weights (fp32 parameters under autocast) would never learn. Formed in float32, they do."""
    from nmt.model.loss import output_cross_entropy

    torch.manual_seed(0)
    vocab, width = 2000, 16
    hidden = (2 * F.one_hot(torch.arange(8) % 4, width).float()).half().requires_grad_(True)
    weight = torch.randn(vocab, width) * 0.05
    weight[:4] = 10 * torch.eye(4, width)  # each row's target takes nearly all; the rest about 2e-9 each
    weight.requires_grad_(True)
    targets = torch.arange(8) % 4
    output_cross_entropy(hidden, weight, None, targets, pad_id=-1).backward(torch.tensor(65536.0))  # a loss scale
    probs = (hidden.detach().double() @ weight.detach().double().T).softmax(dim=-1)
    assert probs[:, 4:].max() < 6e-8  # what fp16 cannot hold
    expected = (probs - F.one_hot(targets, vocab).double()).T @ hidden.detach().double() * 65536
    torch.testing.assert_close(weight.grad[4:].double(), expected[4:], rtol=0.01, atol=1e-6)
    assert weight.grad[4:].abs().max() > 1e-4
    torch.testing.assert_close(hidden.grad.double(), (probs - F.one_hot(targets, vocab).double())
                               @ weight.detach().double() * 65536, rtol=0.01, atol=1.0)


def test_the_compiled_encoder_and_decoder_are_one_graph_with_dropout_on():
    """`nmt train --compile` traces the encoder and decoder whole: a graph break (the CPU dropout's in-place
    random_ made one at every dropout) splits it into frames that recompile per caller, and past dynamo's
    limit of 8 the rest ran eager, slower than without compiling (benchmarks/TRAINING.md)."""
    from nmt.model.config import ModelConfig
    from nmt.model.transformer import Transformer

    torch.manual_seed(0)
    model = Transformer(ModelConfig.preset("tiny", vocab_size=50, dropout=0.1)).train()
    criterion = TranslationLoss(model, 0.1)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        explained = torch._dynamo.explain(criterion._hidden)(SRC, TGT_IN, model.source_mask(SRC))
    assert explained.graph_count == 1 and explained.graph_break_count == 0, explained.break_reasons


def test_a_batch_without_padding_does_not_compile_the_step_again():
    """Compiled, the mask is a tensor for every batch: the model's None for a CPU batch without padding made
    dynamo compile the encoder and decoder a second time (a minute at WMT size)."""
    from nmt.model.config import ModelConfig
    from nmt.model.transformer import Transformer

    model = Transformer(ModelConfig.preset("tiny", vocab_size=50, dropout=0.0)).train()
    padded = torch.tensor([[5, 6, 7, 3], [8, 9, 3, 0]])
    unpadded = torch.tensor([[5, 6, 3], [8, 9, 3]])
    assert TranslationLoss(model, 0.1).mask(unpadded) is None  # eager: no mask to apply
    criterion = TranslationLoss(model, 0.1, compiled=True)
    masks = [criterion.mask(src) for src in (padded, unpadded)]
    assert all(isinstance(mask, torch.Tensor) and mask.dtype == torch.bool for mask in masks)
    assert masks[1].all() and not masks[0].all()
    compiled = torch.compile(criterion._hidden, backend="eager", dynamic=True)  # dynamo's guards, no codegen
    with torch._dynamo.config.patch(error_on_recompile=True):
        for src in (padded, unpadded):
            tgt = torch.full((2, 3), 5)
            compiled(src, tgt, criterion.mask(src))


def test_a_static_batch_gives_the_loss_and_gradients_of_the_batch_itself():
    """--static-shapes pads lengths to buckets and rows to the budget (nmt.data.batching.static_collate): the
    loss over real tokens and every gradient stay those of the batch as collate makes it."""
    from nmt.data.batching import collate, static_collate
    from nmt.model.config import ModelConfig
    from nmt.model.transformer import Transformer

    torch.manual_seed(0)
    model = Transformer(ModelConfig.preset("tiny", vocab_size=50, dropout=0.0)).train()
    sources, targets = [[5, 6, 7], [8, 9, 10, 11, 12], [13]], [[14, 15], [16, 17, 18, 19], [20, 21, 22]]
    results = []
    for batch in (collate(sources, targets, 0, 2, 3), static_collate(sources, targets, 0, 2, 3, max_tokens=96)):
        model.zero_grad()
        loss = TranslationLoss(model, 0.1)(*batch)
        loss.backward()
        results.append((loss.detach(), gradients(model)))
    assert static_collate(sources, targets, 0, 2, 3, max_tokens=96)[0].shape == (12, 8)
    torch.testing.assert_close(results[1][0], results[0][0])
    assert results[0][1].keys() == results[1][1].keys()
    for name, gradient in results[0][1].items():
        assert torch.isfinite(results[1][1][name]).all(), name
        torch.testing.assert_close(results[1][1][name], gradient, rtol=1e-4, atol=1e-6, msg=name)
