"""The README's Transformers example (its "Hugging Face Transformers" section), extracted and
run as it is, so that the text and the code never drift apart."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytest.importorskip("transformers")

import torch  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
SOURCES = {"README.md": "## Hugging Face Transformers"}


def example(path: str) -> str:
    """The first python block after the section heading ``SOURCES[path]``."""
    section = (ROOT / path).read_text().split(SOURCES[path], 1)[1]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


@pytest.mark.parametrize("path", sorted(SOURCES))
def test_example_trains_and_generates(path, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    torch.manual_seed(0)
    code = example(path)
    assert 'use_transform(model, "1.5-relu"' in code and "Trainer(" in code
    scope: dict = {}
    exec(compile(code, str(ROOT / path), "exec"), scope)
    out = capsys.readouterr()
    assert "analytic tau" in out.err
    printed = re.findall(r"tensor\(\[\[([^\]]*)\]\]\)", out.out)
    assert len(printed) == 3
    for row in printed:                        # the prompt, then up to 6 new tokens
        ids = [int(x) for x in row.split(",")]
        assert ids[:4] == [100, 101, 102, 103] and 4 < len(ids) <= 10
    assert scope["model"].arelu_transform.name == "1.5-relu"
