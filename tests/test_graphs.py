"""Fixed-shape decoding (nmt.model.graphs): the same log-probabilities and hypotheses as the dynamic cache, on
CPU (eager) and, where a GPU is present, as captured CUDA graphs."""

from __future__ import annotations

import pytest
import torch

from nmt.decoding.search import SearchOptions, search
from nmt.model.graphs import GraphDecoder, StepGraphs
from tests.conftest import tiny_model

# Different source lengths give different length caps, so sentences finish at different steps.
SRC = torch.tensor([[5, 6, 7, 8, 9, 3], [10, 11, 3, 0, 0, 0], [12, 13, 14, 3, 0, 0]])


def hypotheses(results):
    return [[(h.tokens, round(h.score, 4)) for h in sentence] for sentence in results]


def test_static_step_reproduces_decode_step_log_probs():
    model = tiny_model(seed=2)
    tgt = torch.randint(4, 60, (3, 20), generator=torch.Generator().manual_seed(5))
    dynamic = model.init_state(SRC)
    decoder = GraphDecoder(model, StepGraphs(capture=False))
    static = decoder.init_state(SRC, beam_size=1, max_length=20)
    assert static.captured.cross_cache.size(4) % 8 == 0  # the source was padded to its bucket
    for t in range(tgt.size(1)):
        expected, dynamic = model.decode_step(tgt[:, t], dynamic)
        log_probs, static = decoder.decode_step(tgt[:, t], static)
        torch.testing.assert_close(log_probs, expected, atol=1e-5, rtol=0)


def test_static_searches_match_the_dynamic_cache_and_reuse_captured_steps():
    model = tiny_model(seed=3)
    graphs = StepGraphs(capture=False)
    decoder = GraphDecoder(model, graphs)
    for beam in (1, 4):
        options = SearchOptions(beam_size=beam, nbest=beam, max_len_b=4)
        expected = hypotheses(search(model, SRC, options))
        assert hypotheses(search(decoder, SRC, options)) == expected
        assert hypotheses(search(decoder, SRC, options)) == expected  # a reused step: stale buffers
    assert len(graphs.steps) == 2  # one per beam size


def test_static_reorder_and_select_follow_the_open_rows():
    model = tiny_model()
    state = StepGraphs(capture=False).init_state(model, SRC, beam_size=2, max_length=8)
    cache = state.captured.self_cache  # (L, 2, R, H, T, Dh)
    state.step = 3
    cache[:, :, :, :, :3] = torch.arange(6, dtype=cache.dtype)[:, None, None, None]
    state.select(torch.tensor([0, 2]))  # sentence 1 finished: physical rows 2 and 3 go idle
    assert state.n_sentences == 2
    state.reorder(torch.tensor([1, 1, 3, 2]))  # open rows are physical 0, 1, 4, 5
    assert cache[0, 0, :, 0, :3, 0].tolist() == [[r] * 3 for r in (1, 1, 2, 3, 5, 4)]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device (run on a GPU machine)")
def test_captured_cuda_graphs_give_the_eager_hypotheses():
    model = tiny_model(seed=3).cuda()
    src = SRC.cuda()
    captured = StepGraphs(capture=True)
    decoder = GraphDecoder(model, captured)
    for beam in (1, 4):
        options = SearchOptions(beam_size=beam, nbest=beam, max_len_b=4)
        expected = hypotheses(search(model, src, options))
        for _ in range(2):
            assert hypotheses(search(decoder, src, options)) == expected
    assert all(step.graph is not None for step in captured.steps.values())


def test_captured_steps_stay_within_their_memory_budget():
    model = tiny_model()
    first = StepGraphs(capture=False).init_state(model, SRC, beam_size=1, max_length=8).captured
    assert first.nbytes >= first.self_cache.nbytes + first.cross_cache.nbytes
    graphs = StepGraphs(capture=False, max_bytes=int(1.5 * first.nbytes))
    for beam in (1, 2, 1):
        graphs.init_state(model, SRC, beam_size=beam, max_length=8)
    assert [key[1] for key in graphs.steps] == [1]  # the beam-2 step made room, then gave it back
