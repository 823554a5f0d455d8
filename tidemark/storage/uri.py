"""Parsing of storage URIs and validation of the relative paths used inside a root.

One place decides what a valid root looks like so ``open_storage`` and both backends
reject bad input the same way, with an ``InvalidArgumentError`` naming the field.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from tidemark.errors import InvalidArgumentError

_BUCKET_NAME = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
_IP_ADDRESS = re.compile(r"^\d+\.\d+\.\d+\.\d+$")


@dataclass(frozen=True)
class LocalUri:
    """A local directory root; ``root`` is absolute and normalised."""

    root: str

    @property
    def canonical(self) -> str:
        return self.root


@dataclass(frozen=True)
class S3Uri:
    """An S3 root; ``prefix`` is '' or a key prefix without leading/trailing '/'."""

    bucket: str
    prefix: str

    @property
    def canonical(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}".rstrip("/")


def parse_uri(uri: str) -> LocalUri | S3Uri:
    """Classify ``uri`` as a local path, ``file://`` URI or ``s3://bucket/prefix``."""
    if not uri or not uri.strip():
        raise InvalidArgumentError("must not be empty", field="uri")
    refuse_short_file_uri(uri, field="uri")
    if "://" not in uri:
        return LocalUri(root=_absolute(uri))
    parts = urlsplit(uri)
    if parts.scheme == "file":
        if parts.netloc not in ("", "localhost") or not parts.path:
            raise InvalidArgumentError(f"expected file:///absolute/path: {uri}", field="uri")
        return LocalUri(root=_absolute(parts.path))
    if parts.scheme == "s3":
        return _parse_s3(uri, parts.netloc, parts.path)
    raise InvalidArgumentError(
        f"unsupported scheme {parts.scheme!r} (use a local path, file:// or s3://): {uri}",
        field="uri",
    )


def refuse_short_file_uri(uri: str, *, field: str) -> None:
    """``file:/abs`` (Hadoop's spelling) would otherwise be read as a relative path named
    ``file:``; say what to write instead."""
    scheme, colon, rest = uri.partition(":")
    if colon and scheme.lower() == "file" and not rest.startswith("//"):
        path = "/" + rest.lstrip("/")
        raise InvalidArgumentError(
            f"{uri!r} is not a URI Tidemark reads: a file URI needs three slashes "
            f"(file://{path}), or give the plain path {path}",
            field=field,
        )


def canonical_uri(uri: str) -> str:
    """One spelling per root: a local path made absolute and normalised, an S3 URI as
    ``s3://bucket/prefix``; what a process sends to a service that runs elsewhere, and
    the ``uri`` of every opened ``Storage``."""
    return parse_uri(uri).canonical


def _absolute(path: str) -> str:
    return str(Path(path).resolve())


def _parse_s3(uri: str, bucket: str, path: str) -> S3Uri:
    if not bucket:
        raise InvalidArgumentError(f"s3 URI has no bucket: {uri}", field="uri")
    if not _BUCKET_NAME.match(bucket) or ".." in bucket or _IP_ADDRESS.match(bucket):
        raise InvalidArgumentError(f"invalid S3 bucket name {bucket!r}: {uri}", field="uri")
    prefix = path.strip("/")
    if prefix:
        validate_path(prefix, field="uri")
    return S3Uri(bucket=bucket, prefix=prefix)


def validate_path(path: str, *, field: str = "path") -> str:
    """Reject paths that could escape the root or alias another object; return ``path``."""
    if not path:
        raise InvalidArgumentError("must not be empty", field=field)
    if path.startswith("/") or "\\" in path:
        raise InvalidArgumentError(f"must be relative and '/'-separated: {path!r}", field=field)
    for part in path.split("/"):
        if part in ("", ".", ".."):
            raise InvalidArgumentError(f"empty, '.' or '..' component in {path!r}", field=field)
    return path


def validate_prefix(prefix: str) -> str:
    """A listing prefix is '' (everything) or a path, optionally ending in '/'."""
    if prefix:
        validate_path(prefix.removesuffix("/"), field="prefix")
    return prefix


def validate_directory(directory: str) -> str:
    """A folder to list is '' (the root) or a path, optionally ending in '/'; returns it
    without the trailing '/'."""
    return validate_prefix(directory).removesuffix("/")


def hadoop_uri(uri: str) -> str:
    """``uri`` as Hadoop's file systems (Spark's own readers) name it: ``file:///path`` for
    a local root, ``s3a://bucket/prefix`` for S3 (Hadoop's S3A connector, ``hadoop-aws``)."""
    parsed = parse_uri(uri)
    if isinstance(parsed, LocalUri):
        return f"file://{parsed.root}"
    return f"s3a://{parsed.bucket}/{parsed.prefix}".rstrip("/")
