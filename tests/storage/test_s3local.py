"""The local S3 server process and the fault proxy, exercised over real sockets."""

from __future__ import annotations

import http.client
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest

from tidemark.storage import open_storage
from tidemark.testing.s3local import FaultProxy, LocalS3Server


@pytest.fixture
def standalone_fault_proxy(s3_server: str) -> Iterator[FaultProxy]:
    with FaultProxy(s3_server) as fault_proxy:
        yield fault_proxy


def _connect(endpoint: str) -> http.client.HTTPConnection:
    parts = urlsplit(endpoint)
    assert parts.hostname is not None
    return http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)


@pytest.mark.s3
def test_server_answers_until_closed() -> None:
    server = LocalS3Server()
    with urllib.request.urlopen(server.endpoint, timeout=5) as response:
        assert response.status == 200
    server.close()
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(server.endpoint, timeout=5)


def test_proxy_forwards_chunked_uploads_verbatim(
    s3_bucket: str, standalone_fault_proxy: FaultProxy
) -> None:
    bucket = urlsplit(s3_bucket).netloc
    connection = _connect(standalone_fault_proxy.endpoint)
    pieces = [b"alpha-", b"beta-" * 1000, b"gamma"]
    connection.request("PUT", f"/{bucket}/table/chunked", body=iter(pieces), encode_chunked=True)
    response = connection.getresponse()
    response.read()
    assert response.status == 200
    assert open_storage(s3_bucket).read("chunked") == b"".join(pieces)


def test_faults_apply_only_to_matching_requests_then_expire(
    s3_bucket: str, standalone_fault_proxy: FaultProxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    open_storage(s3_bucket).write("target", b"t")
    open_storage(s3_bucket).write("other", b"o")
    monkeypatch.setenv("AWS_ENDPOINT_URL", standalone_fault_proxy.endpoint)
    storage = open_storage(s3_bucket)
    standalone_fault_proxy.fail_next(2, method="GET", path_pattern=r"/table/target$")
    assert storage.read("other") == b"o"
    assert (standalone_fault_proxy.injected, storage.requests.snapshot()) == (0, {"get": 1})
    assert storage.read("target") == b"t"
    assert (standalone_fault_proxy.injected, storage.requests.snapshot()) == (2, {"get": 4})
    assert storage.read("target") == b"t"
    assert (standalone_fault_proxy.injected, storage.requests.snapshot()) == (2, {"get": 5})


def test_persistent_faults_last_until_cleared(
    s3_bucket: str, standalone_fault_proxy: FaultProxy
) -> None:
    bucket = urlsplit(s3_bucket).netloc
    standalone_fault_proxy.fail_always(method="PUT", status=500, code="InternalError")
    connection = _connect(standalone_fault_proxy.endpoint)
    statuses = []
    for attempt in range(4):
        if attempt == 3:
            standalone_fault_proxy.clear()
        connection.request("PUT", f"/{bucket}/table/obj", body=b"x")
        response = connection.getresponse()
        body = response.read()
        statuses.append(response.status)
        if response.status == 500:
            assert b"<Code>InternalError</Code>" in body
    assert statuses == [500, 500, 500, 200]
    assert standalone_fault_proxy.injected == 3


def test_proxy_holds_240_concurrent_keep_alive_connections(
    s3_bucket: str, standalone_fault_proxy: FaultProxy
) -> None:
    bucket = urlsplit(s3_bucket).netloc
    standalone_fault_proxy.latency_ms = 5
    clients = 240
    all_connected = threading.Barrier(clients, timeout=60)
    outcomes: dict[int, list[tuple[int, bool]]] = {}

    def client(number: int) -> None:
        connection = _connect(standalone_fault_proxy.endpoint)
        seen = []
        for round_number in range(2):
            body = f"{number}-{round_number}".encode()
            connection.request("PUT", f"/{bucket}/table/c{number}-{round_number}", body=body)
            response = connection.getresponse()
            response.read()
            seen.append((response.status, response.will_close))
            if round_number == 0:
                all_connected.wait()
        connection.close()
        outcomes[number] = seen

    threads = [threading.Thread(target=client, args=(n,)) for n in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert outcomes == {n: [(200, False), (200, False)] for n in range(clients)}
    storage = open_storage(s3_bucket)
    assert sorted(info.path for info in storage.list("")) == sorted(
        f"c{n}-{r}" for n in range(clients) for r in range(2)
    )
    assert storage.read("c7-1") == b"7-1"


def test_proxy_rejects_non_http_upstream() -> None:
    with pytest.raises(ValueError, match="upstream"):
        FaultProxy("https://s3.amazonaws.com")


def test_delay_rules_hold_only_matching_requests_until_cleared(
    standalone_fault_proxy: FaultProxy,
) -> None:
    standalone_fault_proxy.delay(1500, method="PUT", path_pattern=r"\.parquet$")
    standalone_fault_proxy.delay(500, path_pattern=r"/b/")
    assert standalone_fault_proxy.delay_for("PUT", "/b/t/p/f.parquet") == 1.5
    assert standalone_fault_proxy.delay_for("GET", "/b/t/p/f.parquet") == 0.5
    assert standalone_fault_proxy.delay_for("PUT", "/other/t/.hoodie/x") == 0.0
    standalone_fault_proxy.clear()
    assert standalone_fault_proxy.delay_for("PUT", "/b/t/p/f.parquet") == 0.0
