"""``arelu generate``: lines and a record written, reproducible with a seed, prompts from a
file with empty ones unconditional, and every bad input one line with exit 2 and nothing
written (decoding options, a translation checkpoint, an LM checkpoint given to translate,
NaN logits)."""

from __future__ import annotations

import json

import pytest

from arelu_cli.model import checkpoint
from arelu_cli.util.signatures import machine


def _cli_ok(cli, *args):
    ran = cli("generate", *args)
    assert ran.code == 0, ran.err
    return ran


def test_cli_writes_lines_and_a_record(cli, lm_runs, tmp_path):
    out = tmp_path / "gen.txt"
    _cli_ok(cli, "--checkpoint", lm_runs["1.5-relu"], "--unconditional", "5", "--seed", "3",
            "--max-tokens", "6", "--tau", "0.05", "--out", out)
    lines = out.read_text().splitlines()
    meta = json.loads((tmp_path / "gen.txt.json").read_text())
    assert len(lines) == 5 and meta["prompts"] == 5 and meta["seed"] == 3
    assert meta["decoding"]["tau_shift"] == 0.05 and meta["decoding"]["label"] == "sample-tau+0.05"
    assert meta["checkpoint"].endswith("best.pt") and "transform:1.5-relu" in meta["signature"]
    assert meta["machine"] == machine("cpu")  # its seconds and tokens/s belong to this machine
    again = tmp_path / "again.txt"
    _cli_ok(cli, "--checkpoint", lm_runs["1.5-relu"], "--unconditional", "5", "--seed", "3",
            "--max-tokens", "6", "--tau", "0.05", "--out", again)
    assert again.read_text() == out.read_text()


def test_cli_prompts_from_a_file_and_empty_prompts(cli, lm_runs, tmp_path):
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("Die\n\nDie\n")
    ran = _cli_ok(cli, "--checkpoint", lm_runs["softmax"], "--prompts", prompts,
                  "--decoding", "greedy", "--max-tokens", "4")
    lines = ran.out.splitlines()
    assert len(lines) == 3 and lines[0] == lines[2]


def _fails(cli, tmp_path, *args, match):
    out = tmp_path / "out.txt"
    ran = cli("generate", *args, "--out", out)
    assert ran.code == 2, ran.out
    assert match in ran.err, ran.err
    assert ran.err.count("\n") == 1 and "Traceback" not in ran.err
    assert not out.exists() and not (tmp_path / "out.txt.json").exists()


@pytest.mark.parametrize("args, match", [
    (("--top-p", "0"), "top-p must lie in (0, 1]"),
    (("--top-p", "1.5"), "top-p must lie in (0, 1]"),
    (("--top-k", "0"), "top-k must be a whole number of at least 1"),
    (("--temperature", "0"), "temperature must be a positive number"),
    (("--temperature", "-1"), "temperature must be a positive number"),
    (("--decoding", "beam"), "decoding method must be one of sample, greedy"),
])
def test_bad_decoding_options(cli, lm_runs, tmp_path, args, match):
    _fails(cli, tmp_path, "--checkpoint", lm_runs["softmax"], "--unconditional", "2", *args,
           match=match)


def test_a_tau_shift_on_softmax(cli, lm_runs, tmp_path):
    _fails(cli, tmp_path, "--checkpoint", lm_runs["softmax"], "--unconditional", "2",
           "--tau", "0.1", match="a tau shift applies only to alpha-ReLU, not softmax")


def test_a_translation_checkpoint(cli, toy_runs, tmp_path):
    _fails(cli, tmp_path, "--checkpoint", toy_runs["softmax"], "--unconditional", "2",
           match="is a translation model's checkpoint; use it with arelu translate")


def test_translate_refuses_a_language_model(cli, lm_runs, tmp_path):
    ran = cli("translate", "--checkpoint", lm_runs["softmax"], "--split", "test")
    assert ran.code == 2 and "is a language model's checkpoint; use it with arelu generate" in ran.err
    assert ran.err.count("\n") == 1


def test_nan_logits(cli, lm_runs, tmp_path):
    ckpt = checkpoint.load(lm_runs["softmax"] / "best.pt")
    ckpt["model"]["output.bias"][:] = float("nan")
    checkpoint.save(ckpt, tmp_path / "nan" / "best.pt")
    _fails(cli, tmp_path, "--checkpoint", tmp_path / "nan", "--unconditional", "2",
           match="the logits hold NaN")


def test_an_empty_prompts_file(cli, lm_runs, tmp_path):
    (tmp_path / "none.txt").write_text("")
    _fails(cli, tmp_path, "--checkpoint", lm_runs["softmax"], "--prompts", tmp_path / "none.txt",
           match="no prompts to continue")


def test_prompt_source_is_exactly_one(cli, lm_runs, tmp_path):
    _fails(cli, tmp_path, "--checkpoint", lm_runs["softmax"], "--unconditional", "2", "--split",
           "test", match="give exactly one of --prompts FILE")
