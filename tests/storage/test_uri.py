from __future__ import annotations

import pickle
from pathlib import Path

import pytest

from tidemark.errors import InvalidArgumentError
from tidemark.storage import LocalStorage, open_storage
from tidemark.storage.s3 import S3Storage
from tidemark.storage.uri import LocalUri, S3Uri, parse_uri, validate_path, validate_prefix


def test_plain_path_and_file_uri_open_local_storage(tmp_path: Path) -> None:
    by_path = open_storage(str(tmp_path))
    by_uri = open_storage(f"file://{tmp_path}")
    assert isinstance(by_path, LocalStorage)
    assert isinstance(by_uri, LocalStorage)
    assert by_path.root == by_uri.root == tmp_path.resolve()


def test_s3_uri_opens_s3_storage_with_bucket_and_prefix() -> None:
    storage = open_storage("s3://my-bucket/tables/orders/")
    assert isinstance(storage, S3Storage)
    assert (storage.bucket, storage.key_prefix) == ("my-bucket", "tables/orders/")
    assert parse_uri("s3://my-bucket") == S3Uri(bucket="my-bucket", prefix="")


@pytest.mark.parametrize(
    "spelling",
    [
        "data/t1",
        "data/t1/",
        "./data/../data/t1",
        "data//t1",
        "{root}/data/t1/",
        "file://{root}/data/x/../t1",
    ],
)
def test_opened_storage_keeps_the_canonical_root(
    spelling: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every spelling of one folder opens a storage whose ``uri`` is the absolute, normalised
    path, so nothing below the layer that opened it canonicalises again."""
    monkeypatch.chdir(tmp_path)
    storage = open_storage(spelling.format(root=tmp_path))
    assert storage.uri == str(tmp_path.resolve() / "data" / "t1")
    assert pickle.loads(pickle.dumps(storage)).uri == storage.uri


@pytest.mark.parametrize(
    "spelling", ["s3://my-bucket/tables/orders/", "s3://my-bucket//tables/orders"]
)
def test_opened_s3_storage_keeps_the_canonical_root(spelling: str) -> None:
    assert open_storage(spelling).uri == "s3://my-bucket/tables/orders"


def test_relative_path_becomes_absolute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert parse_uri("data/t1") == LocalUri(root=str(tmp_path.resolve() / "data" / "t1"))


@pytest.mark.parametrize(
    "uri",
    [
        "",
        "   ",
        "gs://bucket/path",
        "hdfs://namenode/path",
        "s3://",
        "s3:///prefix",
        "s3://ab/prefix",
        "s3://Upper-Case/prefix",
        "s3://bad_underscore/x",
        "s3://-leading-dash/x",
        "s3://two..dots/x",
        "s3://192.168.1.1/x",
        "s3://bucket/a/../b",
        "file://remote-host/path",
    ],
)
def test_bad_uris_are_invalid_arguments_naming_uri(uri: str) -> None:
    with pytest.raises(InvalidArgumentError) as raised:
        open_storage(uri)
    assert raised.value.field == "uri"
    assert "\n" not in str(raised.value)


@pytest.mark.parametrize("path", ["", "/abs", "a//b", "a/./b", "../up", "a/..", "dir/", "a\\b"])
def test_paths_that_escape_or_alias_are_rejected(path: str) -> None:
    with pytest.raises(InvalidArgumentError) as raised:
        validate_path(path)
    assert raised.value.field == "path"


@pytest.mark.parametrize("prefix", ["", "a", "a/", ".hoodie/", "p/2024-01"])
def test_listing_prefixes_may_be_empty_or_end_in_slash(prefix: str) -> None:
    assert validate_prefix(prefix) == prefix


def test_bad_listing_prefix_names_prefix() -> None:
    with pytest.raises(InvalidArgumentError) as raised:
        validate_prefix("/")
    assert raised.value.field == "prefix"
