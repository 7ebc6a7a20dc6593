"""The README's "Hugging Face Transformers" example, extracted from README.md and run as
it is, so that the two never drift apart."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytest.importorskip("transformers")

import torch  # noqa: E402

README = Path(__file__).resolve().parents[2] / "README.md"


def readme_example() -> str:
    section = README.read_text().split("## Hugging Face Transformers", 1)[1]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_readme_example_trains_and_generates(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    torch.manual_seed(0)
    code = readme_example()
    assert 'use_transform(model, "1.5-relu")' in code and "Trainer(" in code
    scope: dict = {}
    exec(compile(code, str(README), "exec"), scope)
    out = capsys.readouterr()
    assert "analytic tau" in out.err
    printed = re.findall(r"tensor\(\[\[([^\]]*)\]\]\)", out.out)
    assert len(printed) == 3
    for row in printed:                        # the prompt, then up to 6 new tokens
        ids = [int(x) for x in row.split(",")]
        assert ids[:4] == [100, 101, 102, 103] and 4 < len(ids) <= 10
    assert scope["model"].arelu_transform.name == "1.5-relu"
