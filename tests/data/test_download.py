"""Downloads, with the network faked: hub rows become splits, archives become a --source."""

from __future__ import annotations

import tarfile

import pytest

from arelu_cli.data import download
from arelu_cli.data.corpora import get_spec
from arelu_cli.data.prepare import PrepareRequest, prepare
from arelu_cli.data.prepared import load_prepared

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


def test_archive_is_extracted_once_and_read_like_a_source(online, monkeypatch, tmp_path):
    folder = tmp_path / "pack" / "de-en"
    for split, n in (("train", 20), ("dev", 3), ("test", 3)):
        write_pair(folder, split, ("src", "tgt"), n)
    archive = tmp_path / "corpus.tgz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(folder, arcname="de-en")
    monkeypatch.setenv("ARELU_CACHE", str(tmp_path / "cache"))
    spec = get_spec("custom")
    first = download.fetch_archive(spec, archive.as_uri(), "de-en")
    assert first == tmp_path / "cache" / "custom" / "de-en" and (first / "train.src").is_file()
    archive.unlink()  # a second call must not download again
    assert download.fetch_archive(spec, archive.as_uri(), "de-en") == first
    prepare(PrepareRequest("custom", tmp_path / "out", source=first, merges=20))
    assert len(load_prepared(tmp_path / "out").split("train")) == 20
