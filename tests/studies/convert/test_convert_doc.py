"""docs/convert.md's recipe, extracted and run as it is on a tiny Llama "pretrained" for a
few softmax steps, so that the document and the code never drift apart."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytest.importorskip("transformers")

import torch  # noqa: E402

DOC = Path(__file__).resolve().parents[3] / "docs" / "convert.md"


def doc_example() -> str:
    return re.search(r"```python\n(.*?)```", DOC.read_text(), re.S).group(1)


def runs(n: int, batch: int = 8, length: int = 12):
    """Toy text: runs of consecutive ids, as many batches as asked."""
    for _ in range(n):
        yield 3 + torch.arange(length) + torch.randint(0, 40, (batch, 1))


def test_the_recipe_converts_a_pretrained_model_and_samples_from_it(capsys):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(vocab_size=60, hidden_size=16, intermediate_size=32,
                                         num_hidden_layers=2, num_attention_heads=2,
                                         eos_token_id=2, pad_token_id=0))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    for ids in runs(30):                                    # softmax "pretraining"
        model(input_ids=ids, labels=ids).loss.backward()
        opt.step()
        opt.zero_grad()
    scope = {"model": model, "batches": runs(100), "dev_ids": next(runs(1)),
             "prompt": torch.tensor([[10, 11, 12]])}
    exec(compile(doc_example(), str(DOC), "exec"), scope)
    out = capsys.readouterr().out
    assert scope["model"].arelu_transform.name == "1.5-relu"
    tried = {float(t): float(ppl) for t, ppl in
             re.findall(r"tau ([\d.]+): eps-ppl ([\d.]+) on dev", out)}
    assert len(tried) == 5                                   # the grid, each scored on dev
    assert scope["tau"] == min(scope["scores"], key=scope["scores"].get)  # the best one kept
    assert scope["tau"] == pytest.approx(min(tried, key=tried.get), abs=1e-4)
    assert scope["model"].arelu_transform.tau == pytest.approx(scope["tau"])
    lines = re.findall(r"support ([\d.]+), sum p ([\d.]+), eps-ppl ([\d.]+)", out)
    assert len(lines) == 3                                   # before, step 10, step 20
    support, total, ppl = map(float, lines[-1])
    assert 1 <= support < 60 and 0 < total and ppl < 60   # sparse, and better than uniform
    assert "tensor([[10, 11, 12" in out
