"""The one runner of every study and ``arelu report``: a study is found by its kind, a
folder's record says which study it is, files arelu did not write are refused before any
work, and errors are one line; no study imports another and every package imports only the
layers below it."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from arelu_cli.config import load_config
from arelu_cli.studies.contract import RECORD, write_record
from arelu_cli.studies.runner import studies
from arelu_cli.util.errors import UserError

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "arelu_cli"
LAYERS = ("util", "transforms", "registry", "config", "data", "model", "decode", "train", "hf",
          "analysis", "bench", "studies", "cli")
"""The import order of the package's folders: each imports only those before it."""
STUDIES = {"paper", "tuned", "attention", "lm", "convert"}


def _small(**tables) -> object:
    overrides = {("train", "keep_every"): 1000, ("train", "max_minutes"): 0.0,
                 ("study", "convergence_steps"): 0}
    for section, values in tables.items():
        overrides |= {(section, k): v for k, v in values.items()}
    return load_config(None, overrides)


def test_every_study_is_a_folder_found_by_its_kind():
    found = studies()
    assert STUDIES <= set(found)
    for kind, study in found.items():
        assert study.kind == kind and (PACKAGE / "studies" / kind / "study.py").is_file()
        assert study.outputs and all(name.endswith(".csv") for name in study.outputs)
        assert all(name.endswith(".png") for name in study.figures)


@pytest.mark.parametrize("kind", ["tuned", "attention"])
def test_a_file_as_results_folder_is_one_line(tmp_path, kind, run_study):
    out = tmp_path / "results.csv"
    out.write_text("mine\n")
    with pytest.raises(UserError, match="is a file, not a results folder"):
        run_study(_small(), out, lambda *a: pytest.fail("nothing trains"), kind)
    assert out.read_text() == "mine\n"


@pytest.mark.parametrize("kind, name", [("attention", "results.csv"), ("attention", "REPORT.md"),
                                        ("tuned", "sweep.csv"), ("tuned", "test_bleu.csv"),
                                        ("tuned", "sweep.png"), ("tuned", RECORD)])
def test_a_users_file_of_an_outputs_name_is_refused_before_any_training(tmp_path, kind, name,
                                                                       run_study):
    (tmp_path / name).write_bytes(b"mine,theirs\n1,2\n")
    calls = []
    with pytest.raises(UserError, match=rf"{tmp_path / name} exists and was not written by "
                                        "arelu.*move that file away or give another --out"):
        run_study(_small(), tmp_path, lambda *a: calls.append(a), kind)
    assert calls == [] and [p.name for p in tmp_path.iterdir()] == [name]


@pytest.mark.parametrize("allow", [False, True])
def test_allow_data_change_reaches_the_trainer(tmp_path, monkeypatch, allow, run_study):
    import arelu_cli.train.loop as module

    seen = []

    def fake_train(config, folder, **kwargs):
        seen.append(kwargs["allow_data_change"])
        raise KeyboardInterrupt  # the first run is enough

    monkeypatch.setattr(module, "train", fake_train)
    with pytest.raises(KeyboardInterrupt):
        run_study(_small(), tmp_path, kind="attention", allow_data_change=allow)
    assert seen == [allow]


@pytest.mark.parametrize("args, message", [
    (["toy"], "recipes/toy.toml names no study: set [study] kind to one of attention, convert, "
              "lm, tuned in it (the paper's grid of a recipe is arelu reproduce toy)"),
    (["toy", "--set", "study.kind=lm"], "the language-model study needs a language-model "
                                        "recipe"),
    (["toy", "--set", "study.kind=nothing"], "no study of kind 'nothing'"),
    (["toy-attention", "--set", "data.path=nowhere"], "not a prepared corpus folder")])
def test_the_study_command_refuses_in_one_line_before_making_anything(tmp_path, monkeypatch, cli,
                                                                      args, message):
    monkeypatch.chdir(tmp_path)
    ran = cli("study", *args)
    assert ran.code == 2 and message in ran.err.replace("\n", " "), ran.err
    assert list(tmp_path.iterdir()) == []


def test_reproduce_refuses_the_recipe_of_another_study(tmp_path, monkeypatch, cli):
    monkeypatch.chdir(tmp_path)
    ran = cli("reproduce", "ptb-lm-study")
    assert ran.code == 2 and "is a recipe of the lm study; run it with arelu study" in ran.err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("make, message", [
    (lambda p: None, "no results folder"),
    (lambda p: p.mkdir(), "holds no study.json, so it is not a study's folder"),
    (lambda p: p.write_text("keep\n"), "is a file, not a results folder")])
def test_report_on_what_is_no_study_folder_is_one_line_and_writes_nothing(tmp_path, cli, make,
                                                                         message):
    folder = tmp_path / "results"
    make(folder)
    before = sorted(tmp_path.rglob("*"))
    ran = cli("report", folder)
    assert ran.code == 2 and message in ran.err and ran.err.count("\n") == 1
    assert "--out" not in ran.err and "Traceback" not in ran.err
    assert sorted(tmp_path.rglob("*")) == before


def _user_png(path: Path) -> bytes:
    """A PNG that arelu did not draw (matplotlib's, without arelu's mark)."""
    import matplotlib.pyplot as plt

    fig = plt.figure(figsize=(1, 1))
    fig.savefig(path)
    plt.close(fig)
    return path.read_bytes()


@pytest.mark.parametrize("name", ["REPORT.md", "fig_alpha_relu_curves.png",
                                  "fig_alpha_relu_curves.csv"])
def test_report_never_replaces_a_users_file(tmp_path, cli, name):
    write_record(tmp_path, "paper", "test", _small(study={"kind": "paper"}))
    path = tmp_path / name
    if name.endswith(".png"):
        _user_png(path)
    else:
        path.write_text("# my notes\n")
    before = path.read_bytes()
    ran = cli("report", tmp_path)
    assert ran.code == 2 and f"{path} exists and was not written by arelu" in ran.err
    assert "--out" not in ran.err and ran.err.count("\n") == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([name, RECORD])
    assert path.read_bytes() == before


def test_report_replaces_its_own_outputs_and_takes_set(tmp_path, cli):
    from arelu_cli.util.ownership import MD_MARK, png_text

    write_record(tmp_path, "paper", "test", _small(study={"kind": "paper"}))
    assert cli("report", tmp_path).code == 0
    report, png = tmp_path / "REPORT.md", tmp_path / "fig_alpha_relu_curves.png"
    assert report.read_text().endswith(MD_MARK + "\n")
    assert png_text(png, "Software").startswith("arelu")
    before = report.read_text()
    assert cli("report", tmp_path, "--set", "reproduce.gpu_watts=250").code == 0
    assert report.read_text() == before and png_text(png, "Software").startswith("arelu")
    record = json.loads((tmp_path / RECORD).read_text())
    assert record["config"]["reproduce"]["gpu_watts"] == 0.0  # --set is for this report


def _imports(path: Path) -> set[str]:
    """The ``arelu_cli`` modules ``path`` imports, wherever the import statement is."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            found |= {node.module} | {f"{node.module}.{a.name}" for a in node.names}
    return {name for name in found if name.startswith("arelu_cli.")}


def test_no_study_imports_another():
    folders = {p.parent.name for p in (PACKAGE / "studies").glob("*/study.py")}
    assert STUDIES <= folders
    for kind in folders:
        for path in (PACKAGE / "studies" / kind).rglob("*.py"):
            others = {name.split(".")[2] for name in _imports(path)
                      if name.startswith("arelu_cli.studies.")
                      and name.split(".")[2] in folders}
            assert others <= {kind}, f"{path.relative_to(ROOT)} imports studies {others - {kind}}"


def test_each_package_imports_only_the_layers_below_it():
    rank = {name: i for i, name in enumerate(LAYERS)}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE).with_suffix("").parts
        here = parts[0]
        if here not in rank:
            continue
        for name in _imports(path):
            there = name.split(".")[1]
            if there in rank and there != here:
                assert rank[there] < rank[here], (
                    f"{path.relative_to(ROOT)} ({here}) imports {name} ({there}), a layer "
                    "above it")


def test_the_run_folder_file_names_are_known_to_one_module():
    """``config.json``, ``log.csv`` and ``summary.json`` as code (not prose) appear in
    ``train/run_dir.py`` alone."""
    names = ("config.json", "log.csv", "summary.json")
    for path in PACKAGE.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docs = {id(node.body[0].value) for node in ast.walk(tree)
                if isinstance(node, (ast.Module, ast.FunctionDef, ast.ClassDef))
                and node.body and isinstance(node.body[0], ast.Expr)}
        for node in ast.walk(tree):
            if (isinstance(node, ast.Constant) and isinstance(node.value, str)
                    and id(node) not in docs
                    and any(node.value == n or node.value.endswith("/" + n) for n in names)):
                assert path == PACKAGE / "train" / "run_dir.py", (
                    f"{path.relative_to(ROOT)} names {node.value!r}")


def test_nothing_parses_a_signature_or_a_label_back():
    for path in PACKAGE.rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        assert "signature_field" not in text, path
        assert '.endswith("-ReLU")' not in text, path
