"""Atomic writes: never half a file, file modes kept, one-line errors."""

import os

import pytest

from arelu_cli.util.atomic import atomic_write_text
from arelu_cli.util.errors import UserError


def test_atomic_write_replaces_whole_file(tmp_path):
    path = tmp_path / "f.txt"
    atomic_write_text(path, "old")
    atomic_write_text(path, "new")
    assert path.read_text() == "new"


@pytest.fixture
def umask_027():
    old = os.umask(0o027)
    yield
    os.umask(old)


def test_new_files_follow_the_umask_and_replaced_files_keep_their_mode(tmp_path, umask_027):
    new = atomic_write_text(tmp_path / "new.txt", "a")
    assert new.stat().st_mode & 0o777 == 0o640
    for mode in (0o644, 0o600, 0o664):
        new.chmod(mode)
        atomic_write_text(new, "b")
        assert new.stat().st_mode & 0o777 == mode and new.read_text() == "b"


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_a_read_only_folder_is_a_one_line_error(tmp_path):
    (tmp_path / "ro").mkdir(mode=0o555)
    with pytest.raises(UserError, match="Permission denied"):
        atomic_write_text(tmp_path / "ro" / "f.txt", "x")
