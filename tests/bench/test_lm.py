"""arelu_cli.bench.lm: the timed loops generate as ``lm-eval`` does, the head loop
sees the states the model sampled from, and the ratios are paired per repeat. Times are
never asserted beyond being positive."""

import statistics

import pytest
import torch

from arelu_cli.bench import lm as L
from arelu_cli.decode.generate import sample_batch
from arelu_cli.decode.translate import open_checkpoint
from arelu_cli.decode.sampling import Decoding, next_tokens

PROMPTS = [[5, 6, 7], [8, 9, 10], [11, 12, 13]]


@pytest.fixture(scope="module")
def decoders(lm_runs):
    return {name: open_checkpoint(folder, None, "cpu", task="lm")
            for name, folder in lm_runs.items()}


def test_contexts_lead_with_eos_and_cycle_the_prompts():
    assert L.contexts(PROMPTS, 4, eos_id=2).tolist() == [
        [2, 5, 6, 7], [2, 8, 9, 10], [2, 11, 12, 13], [2, 5, 6, 7]]
    with pytest.raises(ValueError, match="same number of tokens"):
        L.contexts([[1, 2], [3]], 2, eos_id=2)


@pytest.mark.parametrize("name", ["softmax", "1.5-relu"])
def test_greedy_steps_are_lm_evals_generation(decoders, name, one_thread):
    """Greedy decoding from the prefilled state gives ``sample_batch``'s continuation (the
    code lm-eval generates with) up to its first end-of-sentence."""
    decoder = decoders[name]
    timed = L.Timed(decoder, "greedy", Decoding("greedy"), seed=1)
    context = L.contexts(PROMPTS, 3, decoder.data.eos_id)
    steps = 6
    ours = L.decode_steps(decoder.model, L.prefill(decoder.model, context), timed,
                          torch.Generator(), steps).tolist()
    theirs = sample_batch(decoder.model, PROMPTS, decoder.transform, Decoding("greedy"),
                          torch.Generator(), steps, decoder.data.eos_id, decoder.device)
    for row, expected in zip(ours, theirs):
        cut = row.index(decoder.data.eos_id) if decoder.data.eos_id in row else steps
        assert row[:cut] == expected


@pytest.mark.parametrize("name, decoding", [("softmax", Decoding(top_p=0.9)),
                                            ("1.5-relu", Decoding())])
def test_the_head_sees_the_states_each_step_sampled_from(decoders, name, decoding, one_thread):
    """``hidden @ W.T + b`` of the recorded states is the logits of each step of the same
    seeded generation."""
    decoder = decoders[name]
    timed = L.Timed(decoder, decoding.label(), decoding, seed=1)
    context, steps = L.contexts(PROMPTS, 2, decoder.data.eos_id), 5
    hidden = L.hidden_states(timed, context, steps, seed=3)
    assert hidden.shape == (steps, 2, decoder.config.model.d_model)
    model, logits = decoder.model, []
    state, current = L.prefill(model, context)
    generator = torch.Generator().manual_seed(3)
    with torch.no_grad():
        for _ in range(steps):
            logits.append(model.step(current, state))
            current = next_tokens(logits[-1], decoder.transform, decoding, generator)
        again = model.output(hidden)
    assert torch.allclose(again, torch.stack(logits), atol=1e-5)


def test_ratios_are_medians_of_the_paired_repeats(decoders, one_thread):
    models = [L.Timed(decoders["softmax"], "sample", Decoding(), 1),
              L.Timed(decoders["softmax"], "sample-top_p0.9", Decoding(top_p=0.9), 1),
              L.Timed(decoders["1.5-relu"], "sample", Decoding(), 1),
              L.Timed(decoders["1.5-entmax"], "greedy", Decoding("greedy"), 1)]
    rows = L.batch_rows(models, PROMPTS, 2, L.Measure(steps=3, repeats=3, seed=0))
    by = {(r["transform"], r["decoding"]): r for r in rows}
    base, top_p = by["softmax", "sample"], by["softmax", "sample-top_p0.9"]
    times = {k: [float(x) for x in r["ms_all"].split()] for k, r in by.items()}
    heads = {k: [float(x) for x in r["head_ms_all"].split()] for k, r in by.items()}
    for key, row in by.items():
        assert len(times[key]) == 3 and row["ms_per_token"] > 0 and row["head_ms_per_token"] > 0
        assert row["ms_per_token"] == pytest.approx(statistics.median(times[key]) / 6, rel=2e-3)
        assert row["ratio_to_softmax_sample"] == pytest.approx(statistics.median(
            a / b for a, b in zip(times[key], times["softmax", "sample"])), rel=2e-3)
        assert row["head_ratio_to_softmax_top_p"] == pytest.approx(statistics.median(
            a / b for a, b in zip(heads[key], heads["softmax", "sample-top_p0.9"])), rel=2e-3)
        assert 0 < row["head_share"]
    assert base["ratio_to_softmax_sample"] == 1 == top_p["ratio_to_softmax_top_p"]
    assert by["1.5-entmax", "greedy"]["support"] == 1
    relu = by["1.5-relu", "sample"]
    assert 1 <= relu["support"] < decoders["1.5-relu"].data.vocab_size
    assert "decoding:sample" in relu["signature"] and "batch:2" in relu["signature"]
    alone = L.batch_rows(models[2:], PROMPTS, 1, L.Measure(steps=2, repeats=1, seed=0))
    assert all(r["ratio_to_softmax_sample"] is None for r in alone)
