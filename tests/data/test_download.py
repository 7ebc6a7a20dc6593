"""Downloads, with the network faked: hub rows become splits, archives become a --source."""

from __future__ import annotations

import subprocess
import sys
import tarfile
import textwrap

import pytest

from arelu_cli.data import download
from arelu_cli.data.corpora import get_spec
from arelu_cli.data.prepare import PrepareRequest, prepare
from arelu_cli.data.prepared import load_prepared
from arelu_cli.util.errors import UserError

from .corpus_files import write_pair


class _Connection:
    def close(self) -> None:
        return None


@pytest.fixture
def online(monkeypatch):
    monkeypatch.setattr(download.socket, "create_connection", lambda *a, **k: _Connection())


def test_hub_rows_in_both_shapes(online, monkeypatch):
    datasets = pytest.importorskip("datasets")
    rows = {"validation": datasets.Dataset.from_dict({"de": ["Hallo"], "en": ["Hello"]}),
            "test": datasets.Dataset.from_dict({"translation": [{"de": "Ja", "en": "Yes"}]})}
    monkeypatch.setattr(datasets, "load_dataset", lambda path, config, split: rows[split])
    got = download.fetch_hub(get_spec("multi30k"), get_spec("multi30k").hub, ["dev", "test"], "en", "de")
    assert got == {"dev": (["Hello"], ["Hallo"]), "test": (["Yes"], ["Ja"])}


def test_hub_without_datasets_says_how_to_install_it(online, monkeypatch):
    monkeypatch.setitem(sys.modules, "datasets", None)  # import datasets -> ImportError
    with pytest.raises(UserError, match=r'multi30k .* needs the datasets package: pip install '
                                        r'-e "\.\[download\]".* --source DIR'):
        download.fetch_hub(get_spec("multi30k"), get_spec("multi30k").hub, ["dev"], "en", "de")


def _archive(tmp_path):
    """A .tgz of a corpus folder ``de-en`` (20 training pairs, 3 dev, 3 test)."""
    folder = tmp_path / "pack" / "de-en"
    for split, n in (("train", 20), ("dev", 3), ("test", 3)):
        write_pair(folder, split, ("src", "tgt"), n)
    archive = tmp_path / "corpus.tgz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(folder, arcname="de-en")
    return archive


def test_archive_is_extracted_once_and_read_like_a_source(online, monkeypatch, tmp_path):
    archive = _archive(tmp_path)
    monkeypatch.setenv("ARELU_CACHE", str(tmp_path / "cache"))
    spec = get_spec("custom")
    first = download.fetch_archive(spec, archive.as_uri(), "de-en")
    assert first == tmp_path / "cache" / "custom" / "de-en" and (first / "train.src").is_file()
    archive.unlink()  # a second call must not download again
    assert download.fetch_archive(spec, archive.as_uri(), "de-en") == first
    prepare(PrepareRequest("custom", tmp_path / "out", source=first, merges=20))
    assert len(load_prepared(tmp_path / "out").split("train")) == 20


KILLED = """
import os, signal, sys, tarfile
from arelu_cli.data import download
from arelu_cli.data.corpora import get_spec
download.socket.create_connection = lambda *a, **k: open(os.devnull)
tarfile.open = lambda *a, **k: os.kill(os.getpid(), signal.SIGKILL)  # killed mid-download
download.fetch_archive(get_spec("custom"), sys.argv[1], "de-en")
"""


def test_a_killed_download_is_cleaned_up_by_the_next_one(online, monkeypatch, tmp_path):
    """Only the hidden folders this tool names (a dead process's) are removed; a user's
    look-alike stays."""
    archive, cache = _archive(tmp_path), tmp_path / "cache"
    monkeypatch.setenv("ARELU_CACHE", str(cache))
    ran = subprocess.run([sys.executable, "-c", textwrap.dedent(KILLED), archive.as_uri()],
                         capture_output=True, text=True, timeout=300)
    assert ran.returncode == -9, ran.stderr
    left = [p.name for p in cache.iterdir()]
    assert len(left) == 1 and left[0].startswith(".custom.tmp-"), left
    (cache / ".custom.mynotes").mkdir()  # not a name arelu makes
    (cache / ".custom.mynotes" / "keep.txt").write_text("mine")
    got = download.fetch_archive(get_spec("custom"), archive.as_uri(), "de-en")
    assert (got / "train.src").is_file() and not (cache / "custom" / ".archive.tgz").exists()
    assert sorted(p.name for p in cache.iterdir()) == [".custom.mynotes", "custom"]


def test_a_broken_archive_is_one_line_and_leaves_nothing(online, monkeypatch, tmp_path):
    monkeypatch.setenv("ARELU_CACHE", str(tmp_path / "cache"))
    (tmp_path / "bad.tgz").write_bytes(b"this is not gzip")
    with pytest.raises(UserError, match=r"is not a readable .tgz archive; .*--source DIR") as info:
        download.fetch_archive(get_spec("custom"), (tmp_path / "bad.tgz").as_uri(), "de-en")
    assert "\n" not in str(info.value)
    assert list((tmp_path / "cache").iterdir()) == []
