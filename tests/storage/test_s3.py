"""S3-specific behaviour against the real moto server: pagination, batching, retries,
fault handling and use from other processes."""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import pytest
from botocore.exceptions import ClientError

from tidemark.errors import (
    ConfigError,
    FailedPreconditionError,
    NotFoundError,
    PermissionDeniedError,
    TidemarkError,
    UnavailableError,
)
from tidemark.storage import Storage, open_storage
from tidemark.storage.retry import MAX_ATTEMPTS_ENV
from tidemark.storage.s3 import S3Storage
from tidemark.testing.s3local import FaultProxy, free_port


def test_list_paginates_with_small_pages(s3_bucket: str) -> None:
    storage = S3Storage(s3_bucket, list_page_size=2)
    for n in range(5):
        storage.write(f"dir/{n}", b"x")
    storage.requests.reset()
    assert [info.path for info in storage.list("dir/")] == [f"dir/{n}" for n in range(5)]
    assert storage.requests.snapshot() == {"list": 3}


def test_thousands_of_keys_list_in_pages_and_delete_in_batches_of_1000(s3_bucket: str) -> None:
    storage = open_storage(s3_bucket)
    paths = [f"many/{n:05d}" for n in range(2500)]
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda path: storage.write(path, b""), paths))
    storage.requests.reset()
    assert [info.path for info in storage.list("many/")] == paths
    assert storage.requests.snapshot() == {"list": 3}
    assert storage.delete_many(paths) == 2500
    assert storage.requests.snapshot() == {"list": 3, "delete": 3}
    assert list(storage.list("many/")) == []


def _write(storage: Storage) -> None:
    storage.write("obj", b"data")


def _read(storage: Storage) -> None:
    assert storage.read("seed") == b"seed"


def _exists(storage: Storage) -> None:
    assert storage.exists("seed")


def _list(storage: Storage) -> None:
    assert [info.path for info in storage.list("")] == ["seed"]


def _delete(storage: Storage) -> None:
    storage.delete_many(["seed"])
    assert not storage.exists("seed")


def _create(storage: Storage) -> None:
    assert storage.create_if_absent("new", b"n") is True


@pytest.mark.parametrize(
    ("operation", "method", "counted_as"),
    [
        (_write, "PUT", "put"),
        (_read, "GET", "get"),
        (_exists, "HEAD", "head"),
        (_list, "GET", "list"),
        (_delete, "POST", "delete"),
        (_create, "PUT", "conditional_put"),
    ],
)
def test_injected_503s_are_retried_and_counted(
    s3_bucket: str,
    faulty_s3: FaultProxy,
    operation: Callable[[Storage], None],
    method: str,
    counted_as: str,
) -> None:
    storage = open_storage(s3_bucket)
    storage.write("seed", b"seed")
    storage.requests.reset()
    faulty_s3.fail_next(2, method=method)
    operation(storage)
    assert faulty_s3.injected == 2
    assert storage.requests.snapshot()[counted_as] == 3


@pytest.mark.parametrize(
    ("status", "code"), [(500, "InternalError"), (409, "ConditionalRequestConflict")]
)
def test_internal_errors_and_conditional_conflicts_are_retried(
    s3_bucket: str, faulty_s3: FaultProxy, status: int, code: str
) -> None:
    storage = open_storage(s3_bucket)
    faulty_s3.fail_next(1, method="PUT", status=status, code=code)
    assert storage.create_if_absent("lock", b"me") is True
    assert storage.create_if_absent("lock", b"other") is False
    assert storage.requests.snapshot() == {"conditional_put": 3}
    assert storage.requests.retries() == {"conditional_put": 1}


def test_persistent_503_raises_unavailable_and_writes_nothing(
    s3_bucket: str, faulty_s3: FaultProxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(MAX_ATTEMPTS_ENV, "3")
    storage = open_storage(s3_bucket)
    faulty_s3.fail_always(method="PUT")
    with pytest.raises(UnavailableError) as raised:
        storage.write("t/obj", b"data")
    assert raised.value.field == "path"
    assert "t/obj" in str(raised.value)
    with pytest.raises(UnavailableError), storage.open_output("t/big") as stream:
        stream.write(b"x" * 100_000)
    assert storage.requests.snapshot() == {"put": 6}
    assert storage.requests.retries() == {"put": 4}  # 3 attempts each, the last not retried
    faulty_s3.clear()
    assert list(storage.list("")) == []


@pytest.mark.parametrize(
    ("status", "code", "kind", "field"),
    [
        (403, "AccessDenied", PermissionDeniedError, "path"),
        (403, "InvalidAccessKeyId", PermissionDeniedError, "credentials"),
        (400, "InvalidRequest", FailedPreconditionError, "path"),
    ],
)
def test_client_errors_are_not_retried_and_name_what_failed(
    s3_bucket: str,
    faulty_s3: FaultProxy,
    status: int,
    code: str,
    kind: type[TidemarkError],
    field: str,
) -> None:
    storage = open_storage(s3_bucket)
    storage.write("obj", b"data")
    faulty_s3.fail_always(method="GET", status=status, code=code)
    with pytest.raises(kind) as raised:
        storage.read("obj")
    assert raised.value.field == field
    assert faulty_s3.endpoint in str(raised.value)
    assert isinstance(raised.value.__cause__, ClientError)
    assert storage.requests.snapshot() == {"put": 1, "get": 1}


def test_unreachable_endpoint_is_retried_then_unavailable(
    s3_bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{free_port()}")
    monkeypatch.setenv(MAX_ATTEMPTS_ENV, "2")
    storage = open_storage(s3_bucket)
    with pytest.raises(UnavailableError) as raised:
        storage.read("obj")
    assert raised.value.field == "path"
    assert storage.requests.snapshot() == {"get": 2}


def test_missing_object_is_not_retried(s3_bucket: str) -> None:
    storage = open_storage(s3_bucket)
    with pytest.raises(NotFoundError):
        storage.read("missing")
    assert storage.requests.snapshot() == {"get": 1}


def test_missing_bucket_is_not_found_naming_uri(s3_server: str) -> None:
    storage = open_storage("s3://tm-no-such-bucket/table")
    with pytest.raises(NotFoundError) as raised:
        storage.read("obj")
    assert raised.value.field == "uri"


def test_invalid_max_attempts_is_a_config_error(
    s3_bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(MAX_ATTEMPTS_ENV, "zero")
    with pytest.raises(ConfigError) as raised:
        open_storage(s3_bucket).write("obj", b"x")
    assert raised.value.field == MAX_ATTEMPTS_ENV


def _write_and_read_back(storage: Storage, path: str) -> tuple[bytes, dict[str, int]]:
    storage.write(path, f"from pid {multiprocessing.current_process().pid}".encode())
    return storage.read(path), storage.requests.snapshot()


@pytest.mark.parametrize("start_method", ["spawn", "fork"])
def test_pickled_s3_storage_works_in_a_subprocess(s3_bucket: str, start_method: str) -> None:
    storage = open_storage(s3_bucket)
    storage.write("from-parent", b"parent")
    context = multiprocessing.get_context(start_method)
    with context.Pool(1) as pool:
        content, counts = pool.apply(_write_and_read_back, (storage, "from-child"))
    assert content.startswith(b"from pid ")
    assert counts == {"put": 1, "get": 1}
    assert storage.read("from-child") == content


def test_create_if_absent_whose_response_was_lost_still_reports_creation(
    s3_bucket: str, faulty_s3: FaultProxy
) -> None:
    storage = open_storage(s3_bucket)
    faulty_s3.fail_next(1, method="PUT", status=500, code="InternalError", forward=True)
    assert storage.create_if_absent("lock", b"owner-a") is True
    assert storage.requests.snapshot() == {"conditional_put": 2, "get": 1}


def test_create_if_absent_retried_into_another_writers_object_reports_false(
    s3_bucket: str, faulty_s3: FaultProxy
) -> None:
    storage = open_storage(s3_bucket)
    assert storage.create_if_absent("lock", b"owner-a") is True
    storage.requests.reset()
    faulty_s3.fail_next(1, method="PUT", status=500, code="InternalError")
    assert storage.create_if_absent("lock", b"owner-b") is False
    assert storage.requests.snapshot() == {"conditional_put": 2, "get": 1}
    assert storage.read("lock") == b"owner-a"
