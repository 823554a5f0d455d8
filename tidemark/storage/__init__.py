"""Storage backends behind one interface; ``open_storage`` picks one from a URI.

``S3Storage`` lives in ``tidemark.storage.s3``.
"""

from __future__ import annotations

from tidemark.storage.base import FileInfo, ListDirResult, RequestCounter, Storage
from tidemark.storage.local import LocalStorage
from tidemark.storage.uri import LocalUri, parse_uri

__all__ = [
    "FileInfo",
    "ListDirResult",
    "LocalStorage",
    "RequestCounter",
    "Storage",
    "open_storage",
]


def open_storage(uri: str) -> Storage:
    """A local path or ``file://`` URI gives LocalStorage, ``s3://bucket/prefix`` S3Storage.

    Raises InvalidArgumentError(field="uri") for anything else. The URI is parsed (and a
    local path resolved) once, here: the storage's ``uri`` is its canonical spelling.
    """
    parsed = parse_uri(uri)
    if isinstance(parsed, LocalUri):
        return LocalStorage(parsed)
    # Imported here: boto3 takes ~0.3 s to import, paid by every Spark Python worker.
    from tidemark.storage.s3 import S3Storage

    return S3Storage(parsed)
