"""The README's library example, extracted from README.md exactly as printed and run: a tiny
model trained in a plain PyTorch loop with the alpha-ReLU loss and the analytic tau."""

import re
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"


def _example() -> str:
    match = re.search(r"<!-- readme-example -->\n```python\n(.*?)```", README.read_text(), re.S)
    assert match, "README.md lost its <!-- readme-example --> block"
    return match.group(1)


def test_the_example_is_short_and_uses_only_the_library():
    code = _example()
    assert len(code.splitlines()) <= 30
    imports = re.findall(r"^(?:from (\S+) import|import (\S+))", code, re.M)
    assert {a or b for a, b in imports} <= {"torch", "torch.nn", "arelu_cli.transforms"}, imports


def test_the_example_runs_learns_and_is_sparse(capsys):
    scope: dict = {}
    exec(compile(_example(), str(README), "exec"), scope)
    assert "accuracy" in capsys.readouterr().out
    vocab = scope["V"]
    assert scope["accuracy"] > 0.95                      # the toy task is learned
    assert 1.0 <= scope["support"] < 0.1 * vocab         # alpha-ReLU's output is sparse
    assert scope["tau"] == scope["analytic_tau"](vocab, d_model=scope["d"]).tau
    assert scope["sampled"].shape == (16,) and (scope["probs"][0].gather(
        1, scope["sampled"].unsqueeze(1)) > 0).all()     # samples only from the support
