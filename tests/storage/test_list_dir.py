"""Storage.list_dir: immediate children only, on local disk and the real moto S3 server."""

from __future__ import annotations

import pytest

from tidemark.errors import InvalidArgumentError
from tidemark.storage import FileInfo, ListDirResult, Storage
from tidemark.storage.s3 import S3Storage

TREE = {
    "top.txt": b"t",
    "a/1.txt": b"one",
    "a/sub/deep/3.txt": b"three",
    "a/sub2/4.txt": b"four",
    "ab.txt": b"ab",
    "b/2.txt": b"two",
}


@pytest.fixture
def tree(storage: Storage) -> Storage:
    for path, data in TREE.items():
        storage.write(path, data)
    storage.requests.reset()
    return storage


def test_root_lists_files_and_folders_without_descending(tree: Storage) -> None:
    assert tree.list_dir("") == ListDirResult(
        files=(FileInfo("ab.txt", 2, 0.0), FileInfo("top.txt", 1, 0.0)), dirs=("a", "b")
    )
    assert tree.requests.snapshot() == {"list": 1}


def test_folder_with_or_without_trailing_slash(tree: Storage) -> None:
    expected = ListDirResult(files=(FileInfo("a/1.txt", 3, 0.0),), dirs=("a/sub", "a/sub2"))
    assert tree.list_dir("a") == expected
    assert tree.list_dir("a/") == expected
    assert tree.list_dir("a/sub") == ListDirResult(files=(), dirs=("a/sub/deep",))


def test_missing_folder_and_file_path_list_empty(tree: Storage) -> None:
    assert tree.list_dir("nope") == ListDirResult((), ())
    assert tree.list_dir("top.txt") == ListDirResult((), ())


@pytest.mark.parametrize("directory", ["/abs", "a/../b", "a//b"])
def test_invalid_folders_are_rejected(storage: Storage, directory: str) -> None:
    with pytest.raises(InvalidArgumentError) as raised:
        storage.list_dir(directory)
    assert raised.value.field == "prefix"


def test_s3_paginates_children_and_folds_deep_keys(s3_bucket: str) -> None:
    storage = S3Storage(s3_bucket, list_page_size=2)
    for n in range(3):
        storage.write(f"d/f{n}", b"x")
    for n in range(50):
        storage.write(f"d/big/m{n}", b"")
    storage.write("d/other/x", b"")
    storage.requests.reset()
    listing = storage.list_dir("d")
    assert [info.path for info in listing.files] == ["d/f0", "d/f1", "d/f2"]
    assert listing.dirs == ("d/big", "d/other")
    assert storage.requests.snapshot() == {"list": 3}
