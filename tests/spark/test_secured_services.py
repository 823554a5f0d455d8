"""A Spark write with the record index and a clustering schedule + run, every service
call through an external ``tidemark serve all`` with mutual TLS, a bearer token and an
allowlist; the token value appears in nothing the processes printed or logged, nor in
the Spark configuration executors get."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from rpc.certs import Authority

from tidemark.rpc.process import ServeProcess

from .clikit import Cli
from .sparkkit import assert_readers_agree

TOKEN = "tidemark-e2e-token-7f3a9c"
DATA = ["id", "name", "part", "ts"]


@pytest.fixture
def secured(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[ServeProcess, Path]]:
    """``serve all`` with mTLS, a token file and one allowed root; the client side's
    TIDEMARK_CLIENT_* settings in this process's environment. Yields the server and its log."""
    authority = Authority(tmp_path)
    server = authority.issue("server", server=True)
    client = authority.issue("client", server=False)
    tokens = tmp_path / "tokens"
    tokens.write_text(f"{TOKEN}\n")
    client_token = tmp_path / "client-token"
    client_token.write_text(f"{TOKEN}\n")
    root = tmp_path / "tables"
    root.mkdir()
    log_path = tmp_path / "serve.log"
    with log_path.open("w") as log_file:
        serving = ServeProcess(
            "all",
            args=[
                "--tls-cert", server.cert,
                "--tls-key", server.key,
                "--tls-client-ca", authority.cert,
                "--auth-token-file", str(tokens),
                "--allowed-root", str(root),
                "--log-level", "debug",
            ],
            log_file=log_file,
        )  # fmt: skip
    monkeypatch.setenv("TIDEMARK_CLIENT_TLS_CA_PATH", authority.cert)
    monkeypatch.setenv("TIDEMARK_CLIENT_TLS_CERT_PATH", client.cert)
    monkeypatch.setenv("TIDEMARK_CLIENT_TLS_KEY_PATH", client.key)
    monkeypatch.setenv("TIDEMARK_CLIENT_TOKEN_FILE", str(client_token))
    try:
        yield serving, log_path
    finally:
        serving.close()


def test_write_index_and_clustering_through_secured_services(
    spark: SparkSession,
    secured: tuple[ServeProcess, Path],
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
) -> None:
    serving, log_path = secured
    table = str(tmp_path / "tables" / "orders")
    cli = Cli(tmp_path, capfd)
    services = ["--marker-service", serving.address, "--markers", "service"]
    printed: list[str] = []
    rows = [{"id": i, "name": f"v1-{i}", "part": "ab"[i % 2], "ts": 1} for i in range(40)]
    create = ["--key", "id", "--partition", "part", "--precombine", "ts"]
    code, err = cli.write(table, rows, "--op", "bulk_insert", *create, *services)
    printed.append(err)
    assert code == 0, err
    more = [{"id": i, "name": f"v1-{i}", "part": "ab"[i % 2], "ts": 1} for i in range(40, 80)]
    code, err = cli.write(table, more, "--op", "bulk_insert", *services)
    printed.append(err)
    assert code == 0, err
    code, out = cli.output("index", "build", "--table", table, "--shards", "2", "--json")
    printed.append(out)
    assert code == 0, out
    changed = [{"id": i, "name": f"v2-{i}", "part": "ab"[i % 2], "ts": 2} for i in range(0, 40, 4)]
    index = ["--index", "record", "--index-service", serving.address]
    code, err = cli.write(table, changed, "--op", "upsert", *index, *services)
    printed.append(err)
    assert code == 0, err
    schedule = ["cluster", "schedule", "--table", table, "--sort-columns", "id"]
    code, out = cli.output(*schedule, "--planner-service", serving.address, "--json")
    printed.append(out)
    assert code == 0, out
    planned = json.loads(out.strip().splitlines()[-1])
    assert planned.get("instant"), planned
    run = ["cluster", "run", "--table", table, "--json", *services]
    code, out = cli.output(*run, "--master", str(spark.sparkContext.master))
    printed.append(out)
    assert code == 0, out
    [ran] = json.loads(out.strip().splitlines()[-1])["plans"]
    assert ran["instant"] == planned["instant"]

    result = assert_readers_agree(table, DATA)
    expected = {str(i): (f"v2-{i}" if i % 4 == 0 and i < 40 else f"v1-{i}") for i in range(80)}
    assert {key: row["name"] for key, row in result.items()} == expected
    log = log_path.read_text()
    assert "request failed" not in log or "UNAUTHENTICATED" not in log
    everything = "\n".join([*printed, log, capfd.readouterr().out])
    assert TOKEN not in everything
    conf = "\n".join(f"{key}={value}" for key, value in spark.sparkContext.getConf().getAll())
    assert TOKEN not in conf
