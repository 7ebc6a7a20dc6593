"""Which output files arelu made: the marks it writes, and refusals."""

import json

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from arelu_cli.util import ownership  # noqa: E402
from arelu_cli.util.errors import UserError  # noqa: E402


def _png(path, **savefig) -> None:
    fig = plt.figure(figsize=(1, 1))
    fig.savefig(path, **savefig)
    plt.close(fig)


def test_a_png_carries_arelus_mark(tmp_path):
    ours, other = tmp_path / "a.png", tmp_path / "b.png"
    _png(ours, metadata=ownership.png_metadata())
    _png(other)
    (tmp_path / "b.csv").write_text("x\n")  # a matplotlib PNG beside a CSV is still anyone's
    assert ownership.png_text(ours, "Software").startswith("arelu")
    assert ownership.png_ours(ours) and not ownership.png_ours(other)
    (tmp_path / "c.png").write_bytes(b"not a png")
    assert ownership.png_text(tmp_path / "c.png", "Software") is None


@pytest.mark.parametrize("text, ours", [
    ("# Report\n\n" + ownership.MD_MARK + "\n", True),
    ("# Old report\nEvery number below is read here\n", False),  # no mark: anyone's
    ("# my notes\n", False),
])
def test_markdown_is_ours_by_its_mark(tmp_path, text, ours):
    path = tmp_path / "REPORT.md"
    path.write_text(text)
    assert ownership.markdown_ours(path) == ours


def test_write_markdown_marks_its_file_and_refuses_a_users(tmp_path):
    path = ownership.write_markdown(tmp_path / "R.md", "# title\n")
    assert path.read_text() == f"# title\n\n{ownership.MD_MARK}\n"
    ownership.write_markdown(path, "# again")  # its own: replaced
    path.write_text("# mine\n")
    with pytest.raises(UserError, match=r"R.md exists and was not written by arelu"):
        ownership.write_markdown(path, "# again")
    assert path.read_text() == "# mine\n"


def test_empty_and_absent_files_hold_nothing_to_lose(tmp_path):
    (tmp_path / "empty.png").write_bytes(b"")
    ownership.check_ours(tmp_path / "empty.png", ownership.png_ours)
    ownership.check_ours(tmp_path / "absent.png", ownership.png_ours)


def test_command_lists_and_json_records(tmp_path):
    commands, record = tmp_path / "commands.txt", tmp_path / "study.json"
    commands.write_text("arelu prepare toy\n\narelu report out\n")
    assert ownership.lines_start_with("arelu ")(commands)
    commands.write_text("make all\n")
    assert not ownership.lines_start_with("arelu ")(commands)
    record.write_text(json.dumps({"recipe": "toy", "config": {}}))
    assert ownership.json_with_keys("recipe", "config")(record)
    record.write_text("[1, 2]")
    assert not ownership.json_with_keys("recipe")(record)
