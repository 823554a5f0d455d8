"""S3 backend on boto3: one object per path under ``s3://bucket/prefix``.

Endpoint and credentials come from the standard AWS chain (``AWS_ENDPOINT_URL`` is
honoured by boto3 itself); path-style addressing is used when an endpoint is set so
local servers work. One boto3 client per process and endpoint is created lazily and
recreated after a fork; boto3 clients are thread-safe, so threads share it. botocore's
retries are off: ``tidemark.storage.retry`` retries, counting every attempt.
"""

from __future__ import annotations

import io
import os
import tempfile
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any, BinaryIO, TypeVar

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError, NoCredentialsError, PartialCredentialsError

from tidemark.errors import (
    FailedPreconditionError,
    NotFoundError,
    PermissionDeniedError,
    TidemarkError,
)
from tidemark.storage.base import (
    DELETE_BATCH_SIZE,
    FileInfo,
    ListDirResult,
    PublishOnClose,
    RequestCounter,
    Storage,
)
from tidemark.storage.retry import call_with_retry, error_code, error_status
from tidemark.storage.uri import (
    S3Uri,
    parse_uri,
    validate_directory,
    validate_path,
    validate_prefix,
)

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client
    from mypy_boto3_s3.type_defs import ListObjectsV2OutputTypeDef

T = TypeVar("T")

ACCESS_DENIED_CODES = frozenset({"AccessDenied", "AllAccessDisabled", "Forbidden"})
CREDENTIALS_CODES: dict[str, str] = {
    "InvalidAccessKeyId": "the AWS access key id is not known",
    "SignatureDoesNotMatch": "the AWS secret access key does not match the access key id",
    "ExpiredToken": "the AWS session token has expired",
    "InvalidToken": "the AWS session token is invalid",
}

LIST_PAGE_SIZE = 1000
READ_BUFFER_SIZE = 1 << 20
MAX_POOL_CONNECTIONS = 64

_clients_lock = threading.Lock()
_clients: dict[tuple[int, str | None], S3Client] = {}


def _endpoint_from_env() -> str | None:
    return os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")


def s3_client() -> S3Client:
    """The process's client for the current endpoint; a forked child builds its own."""
    key = (os.getpid(), _endpoint_from_env())
    client = _clients.get(key)
    if client is not None:
        return client
    with _clients_lock:
        if key not in _clients:
            config = Config(
                retries={"total_max_attempts": 1, "mode": "standard"},
                max_pool_connections=MAX_POOL_CONNECTIONS,
                s3={"addressing_style": "path"} if key[1] else {},
            )
            _clients[key] = boto3.session.Session().client("s3", config=config)
        return _clients[key]


MAX_KEY_BYTES = 1024
"""S3's limit on an object key (UTF-8 bytes)."""


class S3Storage(Storage):
    """Objects under ``s3://bucket/prefix``; ``list_page_size`` caps keys per list request."""

    def __init__(self, uri: str | S3Uri, list_page_size: int = LIST_PAGE_SIZE) -> None:
        """``uri`` as given, or parsed already (``open_storage``: parsed once)."""
        parsed = uri if isinstance(uri, S3Uri) else parse_uri(uri)
        if not isinstance(parsed, S3Uri):
            raise TypeError(f"not an s3 URI: {uri}")
        self.uri = parsed.canonical
        self.bucket = parsed.bucket
        self.key_prefix = f"{parsed.prefix}/" if parsed.prefix else ""
        self.list_page_size = list_page_size
        self.requests = RequestCounter()

    def __reduce__(self) -> tuple[Any, ...]:
        return (S3Storage, (self.uri, self.list_page_size))

    @property
    def max_path_bytes(self) -> int:
        return MAX_KEY_BYTES - len(self.key_prefix.encode())

    def _key(self, path: str) -> str:
        return self.key_prefix + validate_path(path)

    def _call(self, operation: str, key: str, fn: Callable[[], T]) -> T:
        """One request under the retry policy; every failure leaves as a domain error."""
        try:
            return call_with_retry(
                fn, operation=operation, path=f"s3://{self.bucket}/{key}", requests=self.requests
            )
        except ClientError as error:
            raise self._domain_error(error, operation, key) from error
        except (NoCredentialsError, PartialCredentialsError) as error:
            raise PermissionDeniedError(
                f"no usable AWS credentials for s3://{self.bucket} ({error}); set "
                "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE",
                field="credentials",
            ) from error

    def _domain_error(self, error: ClientError, operation: str, key: str) -> TidemarkError:
        """What failed, in one line: the bucket, the credentials, the permission or the object."""
        code, endpoint = error_code(error), _endpoint_from_env() or "AWS S3"
        target = f"s3://{self.bucket}/{key}"
        if code == "NoSuchBucket":
            return NotFoundError(
                f"bucket {self.bucket!r} does not exist (endpoint {endpoint})", field="uri"
            )
        if error_status(error) == 404 or code in ("NoSuchKey", "NotFound"):
            return NotFoundError(
                f"no object {key[len(self.key_prefix) :]!r} in {self.uri}", field="path"
            )
        if code in CREDENTIALS_CODES:
            return PermissionDeniedError(
                f"{CREDENTIALS_CODES[code]} by {endpoint} ({operation} of {target})",
                field="credentials",
            )
        if error_status(error) == 403 or code in ACCESS_DENIED_CODES:
            return PermissionDeniedError(
                f"access denied to {operation} {target} at {endpoint}: the credentials lack "
                "the permission",
                field="path",
            )
        message = error.response.get("Error", {}).get("Message", "")
        return FailedPreconditionError(
            f"storage {operation} of {target} failed at {endpoint}: {code or error_status(error)} "
            f"{message}".rstrip(),
            field="path",
        )

    def _head_size(self, path: str) -> int | None:
        key = self._key(path)
        try:
            head = self._call(
                "head", key, partial(s3_client().head_object, Bucket=self.bucket, Key=key)
            )
        except NotFoundError as missing:
            if missing.field == "path":
                return None
            raise
        return head["ContentLength"]

    def read(self, path: str) -> bytes:
        key = self._key(path)

        def get() -> bytes:
            return s3_client().get_object(Bucket=self.bucket, Key=key)["Body"].read()

        return self._call("get", key, get)

    def write(self, path: str, data: bytes) -> None:
        key = self._key(path)
        put = partial(s3_client().put_object, Bucket=self.bucket, Key=key, Body=data)
        self._call("put", key, put)

    def create_if_absent(self, path: str, data: bytes) -> bool:
        """Conditional put (If-None-Match: *). A 412 after a failed attempt may be our own
        earlier put whose response was lost, so then the content decides: callers that
        race put a unique token in ``data``."""
        key = self._key(path)
        attempted = False

        def put() -> bool:
            nonlocal attempted
            retrying, attempted = attempted, True
            try:
                s3_client().put_object(Bucket=self.bucket, Key=key, Body=data, IfNoneMatch="*")
            except ClientError as error:
                if error_status(error) == 412 or error_code(error) == "PreconditionFailed":
                    return retrying and self.read(path) == data
                raise
            return True

        return self._call("conditional_put", key, put)

    def list(self, prefix: str) -> Iterator[FileInfo]:
        pages = self._pages(self.key_prefix + validate_prefix(prefix))
        return (info for page in pages for info in self._files(page))

    def list_dir(self, directory: str) -> ListDirResult:
        """ListObjectsV2 with Delimiter='/': keys below sub-folders come back folded into
        one CommonPrefix each, so the cost is the number of direct children."""
        directory = validate_directory(directory)
        full_prefix = self.key_prefix + (f"{directory}/" if directory else "")
        files: list[FileInfo] = []
        dirs: list[str] = []
        for page in self._pages(full_prefix, delimiter="/"):
            files.extend(info for info in self._files(page) if not info.path.endswith("/"))
            dirs.extend(
                common["Prefix"][len(self.key_prefix) :].removesuffix("/")
                for common in page.get("CommonPrefixes", [])
            )
        return ListDirResult.from_unsorted(files, dirs)

    def _files(self, page: ListObjectsV2OutputTypeDef) -> Iterator[FileInfo]:
        for entry in page.get("Contents", []):
            yield FileInfo(
                entry["Key"][len(self.key_prefix) :],
                entry["Size"],
                entry["LastModified"].timestamp(),
            )

    def _pages(
        self, full_prefix: str, delimiter: str | None = None
    ) -> Iterator[ListObjectsV2OutputTypeDef]:
        """ListObjectsV2 pages under ``full_prefix``, one counted 'list' request each."""
        token: str | None = None
        while True:
            request: dict[str, Any] = {
                "Bucket": self.bucket,
                "Prefix": full_prefix,
                "MaxKeys": self.list_page_size,
            }
            if delimiter:
                request["Delimiter"] = delimiter
            if token:
                request["ContinuationToken"] = token
            page: ListObjectsV2OutputTypeDef = self._call(
                "list", full_prefix, partial(s3_client().list_objects_v2, **request)
            )
            yield page
            if not page.get("IsTruncated"):
                return
            token = page["NextContinuationToken"]

    def delete_many(self, paths: Iterable[str]) -> int:
        keys = [self._key(path) for path in paths]
        for start in range(0, len(keys), DELETE_BATCH_SIZE):
            batch = keys[start : start + DELETE_BATCH_SIZE]
            self._call("delete", batch[0], partial(self._delete_batch, batch))
        return len(keys)

    def _delete_batch(self, keys: Sequence[str]) -> None:
        """One DeleteObjects request; per-key errors raise so the policy can retry them."""
        response = s3_client().delete_objects(
            Bucket=self.bucket,
            Delete={"Objects": [{"Key": key} for key in keys], "Quiet": True},
        )
        errors = response.get("Errors", [])
        if errors:
            first = errors[0]
            message = (
                f"{len(errors)} keys not deleted, first {first.get('Key')!r}: "
                f"{first.get('Message')}"
            )
            raise ClientError(
                {"Error": {"Code": first.get("Code", ""), "Message": message}},
                "DeleteObjects",
            )

    def exists(self, path: str) -> bool:
        return self._head_size(path) is not None

    def size(self, path: str) -> int:
        size = self._head_size(path)
        if size is None:
            raise NotFoundError(f"no object {path!r} in {self.uri}", field="path")
        return size

    def open_input(self, path: str) -> BinaryIO:
        size = self.size(path)
        return io.BufferedReader(_RangeReader(self, path, size), READ_BUFFER_SIZE)

    def open_output(self, path: str) -> BinaryIO:
        key = self._key(path)

        def upload(temp: io.FileIO) -> None:
            def put() -> None:
                temp.seek(0)
                s3_client().put_object(Bucket=self.bucket, Key=key, Body=temp)

            self._call("put", key, put)

        temp = tempfile.TemporaryFile(prefix="tidemark-upload-", buffering=0)  # noqa: SIM115 (the writer owns and closes it)
        return PublishOnClose(temp, upload, lambda: None)

    def read_range(self, path: str, start: int, length: int) -> bytes:
        """Bytes [start, start+length) of an object in one ranged GET."""
        key = self._key(path)

        def get() -> bytes:
            byte_range = f"bytes={start}-{start + length - 1}"
            response = s3_client().get_object(Bucket=self.bucket, Key=key, Range=byte_range)
            return response["Body"].read()

        return self._call("get", key, get)


class _RangeReader(io.RawIOBase):
    """Seekable raw stream over one object; every read is one ranged GET.

    Wrapped in a BufferedReader, a Parquet reader costs a GET for the footer and one
    per column chunk instead of downloading the whole file.
    """

    def __init__(self, storage: S3Storage, path: str, size: int) -> None:
        super().__init__()
        self._storage = storage
        self._path = path
        self._size = size
        self._position = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._position

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._position, io.SEEK_END: self._size}[whence]
        if base + offset < 0:
            raise ValueError(f"negative seek position {base + offset}")
        self._position = base + offset
        return self._position

    def readinto(self, buffer: Any) -> int:
        length = min(len(buffer), self._size - self._position)
        if length <= 0:
            return 0
        data = self._storage.read_range(self._path, self._position, length)
        memoryview(buffer).cast("B")[: len(data)] = data
        self._position += len(data)
        return len(data)

    def readall(self) -> bytes:
        length = self._size - self._position
        if length <= 0:
            return b""
        data = self._storage.read_range(self._path, self._position, length)
        self._position += len(data)
        return data
