"""``python -m benchmarks index``: the record index's shard files against RocksDB and Parquet,
and the index service's throughput.

(a) One shard of ``--entries`` random UUID keys (locations spread over a thousand file
groups) answers a ``--batch`` lookup, half present, in input order: warm (blocks cached)
and cold (a new cache: every block read, checked and decompressed), from a fresh copy
of the file whose pages were dropped from the OS page cache (checked with mincore), and
from S3 (the local S3 server, moto, with ``--latency-ms`` per request); against RocksDB's
multi-get (``rocksdict``, tuned for point lookups: 10-bit Bloom filter, a block cache
larger than the data holding index and filter blocks, the same 16-byte binary keys) on
the same entries, its binding's conversion of the keys timed apart.
(b) Bytes per entry on storage: the shard file, RocksDB's SST files after a full
compaction, and a plain zstd Parquet file of the same (key, partition, file id, instant).
(c) Keys per second through the gRPC service at 1k, 10k and 100k-key calls, over an
index of ``--entries`` keys built for a table here: a ``tidemark serve index`` process
and one, then two, client processes calling at once; then the largest calls again with
``--workers 2``. Target: 1M keys/s at 100k-key calls.
(d) Tagging an upsert of 0.1% of a ``--table-rows`` table (bulk-inserted here, its index
built from its stored keys): Spark's join of the incoming keys with every base file's
keys (``--index simple``) vs Spark tasks asking the index service for their keys.
(e) A point query by key: reading every base file (row groups pruned by statistics) vs
reading the one file the index names.
Timings are medians of ``--repeat`` runs (at most 3 for (d); (e) is one run). Figures
published elsewhere (Hudi's HFile lookups and entry size) are printed apart, as
references with their source, never as a baseline.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import importlib.metadata
import multiprocessing
import os
import statistics
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as sf

from benchmarks import index_scale
from benchmarks.index_keys import AS_OF, FILE_GROUPS, entry_columns, uuid_keys
from benchmarks.load import bench_table_config
from benchmarks.markers import table_root
from benchmarks.report import ReadmeRow, run_in_temp_root, times
from benchmarks.write import bulk_insert_generated, generate
from tidemark.clients.index import IndexClient
from tidemark.commands.args import positive_int
from tidemark.commands.page_cache import drop_cached_pages
from tidemark.index.block_cache import BlockCache
from tidemark.index.build import build_index
from tidemark.index.keys import encode_keys, sort_unique
from tidemark.index.shard_file import ShardReader, write_shard
from tidemark.jobs.index_writes import tag_with_index
from tidemark.jobs.job_options import non_negative_float
from tidemark.jobs.session import DEFAULT_MASTER, build_session
from tidemark.jobs.tagging import OLD_FILE_ID, existing_keys, tag
from tidemark.rpc.process import ServeProcess
from tidemark.services.index.embedded import start_embedded_index_service
from tidemark.storage import LocalStorage, open_storage
from tidemark.storage.base import Storage
from tidemark.table import HoodieTable
from tidemark.table.files.view import BaseFile
from tidemark.table.records.keys import RECORD_KEY, key_source_columns, stored_record_keys

SERVICE_BATCHES = (1_000, 10_000, 100_000)
SERVICE_KEYS_PER_CLIENT = 2_000_000
"""Keys each client looks up per batch size, in at most ``SERVICE_MAX_CALLS`` calls."""
SERVICE_MAX_CALLS = 300
SERVICE_CLIENTS = (1, 2)
"""Client processes calling at once: one (latency-bound), then two (executors at once)."""
SERVICE_WORKERS = 2
"""Processes of the second server (``--workers``): one per core of a 2-core machine."""
SERVICE_TARGET_KEYS_PER_S = 1_000_000
UPSERT_FRACTION = 0.001
ROCKSDB_BLOOM_BITS_PER_KEY = 10
ROCKSDB_BLOCK_CACHE_BYTES = 1 << 30
RLI_BLOG = (
    "Apache Hudi blog, 'Record Level Index: Hudi's blazing fast indexing for large-scale "
    "datasets' (2023-11-01)"
)
REFERENCES: tuple[dict[str, str], ...] = (
    {
        "what": "Hudi record-level index: an HFile of 1M entries looks up a batch of 100k keys",
        "figure": "600 ms",
        "source": RLI_BLOG,
    },
    {
        "what": "Hudi record-level index: storage per entry (gzip, 4 MB blocks)",
        "figure": "~48 bytes",
        "source": RLI_BLOG,
    },
    {
        "what": "Hudi record-level index vs the global simple index, 2B records: write latency",
        "figure": "72% lower",
        "source": RLI_BLOG,
    },
    {
        "what": "RocksDB MultiGet, one thread, fully cached",
        "figure": "2.2 to 5.2 µs per key",
        "source": "facebook/rocksdb pull requests 5464 and 10535",
    },
)
"""Figures published elsewhere: printed and recorded apart, never in a ratio."""


def register(bench_subparsers: Any) -> None:
    parser: argparse.ArgumentParser = bench_subparsers.add_parser(
        "index",
        help="record index: shard lookups vs RocksDB, size vs Parquet, service throughput",
        description=__doc__,
    )
    parser.add_argument("--entries", type=positive_int, default=1_000_000, help="shard entries")
    parser.add_argument("--batch", type=positive_int, default=100_000, help="keys per lookup")
    parser.add_argument(
        "--table-rows", type=positive_int, default=5_000_000, help="rows of the tagged table"
    )
    parser.add_argument("--repeat", type=positive_int, default=5, help="runs per timing")
    parser.add_argument(
        "--latency-ms",
        type=non_negative_float,
        default=20.0,
        help="added per request to the local S3 server in the S3 cold lookup",
    )
    parser.add_argument("--master", default=DEFAULT_MASTER, help="Spark master")
    parser.add_argument("--json", action="store_true", help="also print one JSON line")
    index_scale.add_arguments(parser)
    parser.set_defaults(handler=run)


def lookup_batch(reader: ShardReader, batch: pa.Array) -> int:
    """One batch lookup answered in input order; returns how many keys were found."""
    unique, inverse = sort_unique(batch)
    found, codes = reader.lookup(unique)
    answer = np.where(found[inverse], codes[inverse].astype(np.int64), -1)
    return int((answer >= 0).sum())


def median_ms(runs: list[float]) -> float:
    return statistics.median(runs) * 1000


def _ms_spread(seconds: list[float]) -> str:
    return f"{min(seconds) * 1000:,.1f}-{max(seconds) * 1000:,.1f} ms"


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    began = time.perf_counter()
    value = fn()
    return time.perf_counter() - began, value


def timed_cpu(fn: Callable[[], Any]) -> tuple[float, float, Any]:
    """Wall and CPU seconds of ``fn`` (CPU time shows the cost on a busy machine)."""
    began, began_cpu = time.perf_counter(), time.process_time()
    value = fn()
    return time.perf_counter() - began, time.process_time() - began_cpu, value


def timed_cold_lookup(
    storage: Storage, path: str, batch: pa.Array, expected: int
) -> tuple[float, float]:
    """Wall and CPU seconds of opening ``path`` with a new block cache and looking
    ``batch`` up (every block read, checked and decompressed)."""
    seconds, cpu_seconds, found = timed_cpu(
        lambda: lookup_batch(ShardReader.open(storage, path, BlockCache()), batch)
    )
    if found != expected:
        raise RuntimeError(f"cold lookup in {storage.uri} found {found} keys, warm {expected}")
    return seconds, cpu_seconds


def measure_shard(
    root: Path, keys: pa.Array, columns: dict[str, pa.Array], batch: pa.Array, repeat: int
) -> tuple[bytes, dict[str, Any]]:
    """The shard file's bytes, part (a) on local disk and its size for (b). Each cold
    lookup reads a fresh copy whose pages were dropped from the OS page cache (the
    fraction still resident, checked with mincore, is reported)."""
    data = write_shard(keys, *columns.values(), as_of=AS_OF)
    storage = LocalStorage(str(root / "shard"))
    storage.write("base.tmi", data)
    reader = ShardReader.open(storage, "base.tmi", BlockCache())
    expected = lookup_batch(reader, batch)
    warm = [timed_cpu(lambda: lookup_batch(reader, batch)) for _ in range(repeat)]
    cold, resident = [], []
    for run in range(repeat):
        path = f"copy-{run}.tmi"
        storage.write(path, data)
        resident.append(drop_cached_pages(root / "shard" / path))
        cold.append(timed_cold_lookup(storage, path, batch, expected))
    return data, {
        "found": expected,
        "warm_ms": median_ms([run[0] for run in warm]),
        "warm_cpu_ms": median_ms([run[1] for run in warm]),
        "cold_ms": median_ms([run[0] for run in cold]),
        "cold_cpu_ms": median_ms([run[1] for run in cold]),
        "cold_resident_fraction": max(resident),
        "bytes_per_entry": len(data) / len(keys),
    }


def measure_s3_cold(
    data: bytes, batch: pa.Array, expected: int, repeat: int, latency_ms: float
) -> dict[str, Any]:
    """Cold lookups of the shard file in S3, as a fresh executor or replica meets them:
    the local S3 server (moto) behind a proxy adding ``latency_ms`` per request."""
    with s3_root(latency_ms) as root:
        storage = open_storage(root)
        storage.write("base.tmi", data)
        storage.requests.reset()
        runs = [timed_cold_lookup(storage, "base.tmi", batch, expected) for _ in range(repeat)]
        requests = storage.requests.total() / repeat
    return {
        "s3_cold_ms": median_ms([run[0] for run in runs]),
        "s3_cold_cpu_ms": median_ms([run[1] for run in runs]),
        "s3_cold_requests": requests,
        "s3_latency_ms": latency_ms,
        "s3_server": "moto (the local S3 emulator)",
    }


@contextlib.contextmanager
def s3_root(latency_ms: float) -> Iterator[str]:
    """``table_root``'s S3 root, with the environment it exports for child processes
    restored afterwards (this bench's later processes use local storage)."""
    saved = dict(os.environ)
    try:
        with table_root("s3", latency_ms) as root:
            yield root
    finally:
        os.environ.clear()
        os.environ.update(saved)


def raw_key_list(keys: pa.Array) -> list[str | int | float | bytes | bool]:
    """The 16 raw bytes of each UUID key, as the shard stores them (a list typed as the
    binding takes it)."""
    raw = encode_keys(keys).raw_uuids().tobytes()
    return [raw[start : start + 16] for start in range(0, len(raw), 16)]


def rocksdb_configuration() -> dict[str, Any]:
    """RocksDB tuned for point lookups as its tuning guide advises, as printed in the JSON."""
    return {
        "binding": f"rocksdict {importlib.metadata.version('rocksdict')}",
        "bloom_filter_bits_per_key": ROCKSDB_BLOOM_BITS_PER_KEY,
        "block_cache_bytes": ROCKSDB_BLOCK_CACHE_BYTES,
        "cache_index_and_filter_blocks": True,
        "pin_l0_filter_and_index_blocks_in_cache": True,
        "compression": "zstd",
        "compacted": "one full compaction after loading",
        "key": "the UUID's 16 raw bytes (as the shard stores it)",
        "value": "2-byte location code",
    }


def rocksdb_options() -> Any:
    from rocksdict import BlockBasedOptions, Cache, DBCompressionType, Options

    table = BlockBasedOptions()
    table.set_bloom_filter(ROCKSDB_BLOOM_BITS_PER_KEY, False)
    table.set_block_cache(Cache(ROCKSDB_BLOCK_CACHE_BYTES))
    table.set_cache_index_and_filter_blocks(True)
    table.set_pin_l0_filter_and_index_blocks_in_cache(True)
    options = Options(raw_mode=True)
    options.set_block_based_table_factory(table)
    options.set_compression_type(DBCompressionType.zstd())
    options.set_bottommost_compression_type(DBCompressionType.zstd())
    return options


def measure_rocksdb(
    root: Path, keys: pa.Array, codes: np.ndarray, batch: pa.Array, repeat: int
) -> dict[str, Any]:
    """RocksDB multi-get on the same entries (value: the 2-byte location code), warm.
    The multi-get alone is timed; the binding's conversion (the batch into a list of
    Python bytes, the answers counted) is timed apart."""
    from rocksdict import Rdict, WriteBatch

    path = str(root / "rocksdb")
    db = Rdict(path, rocksdb_options())
    written = WriteBatch(raw_mode=True)
    for key, value in zip(raw_key_list(keys), codes.astype("<u2").tolist(), strict=True):
        written.put(key, value.to_bytes(2, "little"))
    db.write(written)
    db.flush()
    db.compact_range(None, None)
    sst_bytes = sum(f.stat().st_size for f in Path(path).glob("*.sst"))
    if sst_bytes >= ROCKSDB_BLOCK_CACHE_BYTES:
        raise RuntimeError(f"RocksDB holds {sst_bytes} bytes, more than its block cache")

    def count_found(values: Any) -> int:
        return sum(value is not None for value in values)

    found = count_found(db.get(raw_key_list(batch)))  # also warms the block cache
    runs, conversions = [], []
    for _ in range(repeat):
        convert_s, queries = timed(functools.partial(raw_key_list, batch))
        seconds, cpu_seconds, values = timed_cpu(functools.partial(db.get, queries))
        count_s, _ = timed(functools.partial(count_found, values))
        runs.append((seconds, cpu_seconds))
        conversions.append(convert_s + count_s)
    db.close()
    return {
        "rocksdb_found": found,
        "rocksdb_ms": median_ms([run[0] for run in runs]),
        "rocksdb_cpu_ms": median_ms([run[1] for run in runs]),
        "rocksdb_convert_ms": median_ms(conversions),
        "rocksdb_bytes_per_entry": sst_bytes / len(keys),
        "rocksdb_config": rocksdb_configuration(),
    }


def measure_parquet(root: Path, keys: pa.Array, columns: dict[str, pa.Array]) -> float:
    path = root / "entries.parquet"
    pq.write_table(pa.table({"key": keys, **columns}), path, compression="zstd")
    return path.stat().st_size / len(keys)


def measure_service(root: Path, keys: pa.Array, columns: dict[str, pa.Array]) -> dict[str, Any]:
    """Part (c) as Spark executors use the service: a ``tidemark serve index`` process
    (one worker, then ``SERVICE_WORKERS``) over an index of ``keys`` built for a table
    here, and spawned client processes (this process runs Spark and gRPC threads) making
    calls of each batch size together; keys/s of all of them from the first timed call's
    start to the last one's end."""
    table_uri = str(root / "table")
    table = HoodieTable.create(table_uri, bench_table_config())
    build_index(table.storage, keys, *columns.values(), as_of=AS_OF)
    rates: dict[str, dict[str, float]] = {}
    clients = max(SERVICE_CLIENTS)
    spawn = multiprocessing.get_context("spawn")
    with spawn.Manager() as manager, spawn.Pool(clients, _load_client_keys, (keys,)) as pool:

        def keys_per_s(address: str, size: int, client_count: int) -> float:
            size = min(size, len(keys))
            calls = max(1, min(SERVICE_MAX_CALLS, SERVICE_KEYS_PER_CLIENT // size))
            start = manager.Barrier(client_count)
            spans = pool.starmap(
                _timed_client_lookups,
                [(address, table_uri, size, calls, seed, start) for seed in range(client_count)],
            )
            began, ended = min(span[0] for span in spans), max(span[1] for span in spans)
            return client_count * calls * size / (ended - began)

        with _server(workers=1) as address:
            for size in SERVICE_BATCHES:
                rates[str(min(size, len(keys)))] = {
                    str(count): keys_per_s(address, size, count) for count in SERVICE_CLIENTS
                }
        with _server(workers=SERVICE_WORKERS) as address:
            workers_rate = keys_per_s(address, SERVICE_BATCHES[-1], clients)
    largest = rates[max(rates, key=int)]
    return {
        "service_keys_per_s_by_batch": {size: by[str(clients)] for size, by in rates.items()},
        "service_keys_per_s_one_client_by_batch": {size: by["1"] for size, by in rates.items()},
        "service_keys_per_s": largest[str(clients)],
        "service_keys_per_s_one_client": largest["1"],
        "service_keys_per_s_workers": workers_rate,
        "service_clients": clients,
        "service_workers": SERVICE_WORKERS,
    }


@contextlib.contextmanager
def _server(workers: int) -> Iterator[str]:
    server = ServeProcess("index", args=["--workers", str(workers)])
    try:
        yield server.address
    finally:
        server.close()


_client_keys = pa.array([], pa.string())
"""The entries' keys in a client process (sent once, when the pool starts)."""


def _load_client_keys(keys: pa.Array) -> None:
    global _client_keys
    _client_keys = keys


def _timed_client_lookups(
    address: str, table_uri: str, size: int, calls: int, seed: int, start: Any
) -> tuple[float, float]:
    """One client's timed calls, started once every client has warmed up (``start`` is a
    barrier); returns the wall-clock span of its calls."""
    rng = np.random.default_rng(seed)
    batches = [
        _client_keys.take(pa.array(rng.integers(0, len(_client_keys), size)))
        for _ in range(calls + 1)
    ]
    client = IndexClient(address, table_uri)
    client.lookup(batches[0])
    start.wait()
    began = time.time()
    for timed_batch in batches[1:]:
        client.lookup(timed_batch)
    return began, time.time()


def measure(args: argparse.Namespace, root: Path) -> dict[str, Any]:
    # The JVM starts before any gRPC thread exists: forking it from a process whose gRPC
    # threads are running can lose the gateway.
    spark = build_session(args.master, app_name="tidemark-bench-index", shuffle_partitions=2)
    rng = np.random.default_rng(2024)
    keys = uuid_keys(args.entries, rng)
    columns = entry_columns(keys)
    present = min(args.batch // 2, args.entries)
    chosen = keys.take(pa.array(rng.choice(args.entries, present, replace=False)))
    batch = pa.concat_arrays([chosen, uuid_keys(args.batch - present, rng)])
    batch = batch.take(pa.array(rng.permutation(len(batch))))
    data, shard = measure_shard(root, keys, columns, batch, args.repeat)
    s3_report = measure_s3_cold(data, batch, shard["found"], args.repeat, args.latency_ms)
    codes = np.arange(args.entries) % FILE_GROUPS
    rocksdb = measure_rocksdb(root, keys, codes, batch, args.repeat)
    if rocksdb["rocksdb_found"] != shard["found"]:
        raise RuntimeError(f"RocksDB found {rocksdb['rocksdb_found']}, the shard {shard['found']}")
    service_report = measure_service(root, keys, columns)
    with start_embedded_index_service() as service:
        table_report = measure_table(spark, args, root, service.address)
    return {
        **service_report,
        **table_report,
        **s3_report,
        "entries": args.entries,
        "batch": args.batch,
        "present": shard["found"],
        "warm_ms": shard["warm_ms"],
        "cold_ms": shard["cold_ms"],
        "cold_resident_fraction": shard["cold_resident_fraction"],
        "rocksdb_ms": rocksdb["rocksdb_ms"],
        "rocksdb_convert_ms": rocksdb["rocksdb_convert_ms"],
        "warm_cpu_ms": shard["warm_cpu_ms"],
        "cold_cpu_ms": shard["cold_cpu_ms"],
        "rocksdb_cpu_ms": rocksdb["rocksdb_cpu_ms"],
        "rocksdb_config": rocksdb["rocksdb_config"],
        "bytes_per_entry": shard["bytes_per_entry"],
        "rocksdb_bytes_per_entry": rocksdb["rocksdb_bytes_per_entry"],
        "parquet_bytes_per_entry": measure_parquet(root, keys, columns),
        "master": args.master,
        "load_average_1m": os.getloadavg()[0],
        "references": list(REFERENCES),
    }


def run(args: argparse.Namespace) -> int:
    if args.scale:
        return index_scale.run(args)
    run_in_temp_root(args, "tidemark-bench-index-", measure, format_report)
    return 0


def format_report(report: dict[str, Any]) -> str:
    config = report["rocksdb_config"]
    lines = [
        f"record index: one shard of {report['entries']:,} UUID keys, "
        f"lookups of {report['batch']:,} keys ({report['present']:,} present)",
        f"{'':34} {'tidemark':>12} {'RocksDB':>12} {'RocksDB/ours':>13}",
        f"{'warm lookup (ms)':34} {report['warm_ms']:>12,.1f} {report['rocksdb_ms']:>12,.1f} "
        f"{times(report['rocksdb_ms'], report['warm_ms']):>13}",
        f"{'warm lookup, CPU (ms)':34} {report['warm_cpu_ms']:>12,.1f} "
        f"{report['rocksdb_cpu_ms']:>12,.1f} "
        f"{times(report['rocksdb_cpu_ms'], report['warm_cpu_ms']):>13}",
        f"{'cold lookup, local disk (ms)':34} {report['cold_ms']:>12,.1f}",
        f"{'cold lookup, local disk, CPU (ms)':34} {report['cold_cpu_ms']:>12,.1f}",
        f"{'cold lookup, S3 (ms)':34} {report['s3_cold_ms']:>12,.1f}",
        f"{'bytes per entry':34} {report['bytes_per_entry']:>12,.1f} "
        f"{report['rocksdb_bytes_per_entry']:>12,.1f} "
        f"{times(report['rocksdb_bytes_per_entry'], report['bytes_per_entry']):>13}",
        f"plain Parquet: {report['parquet_bytes_per_entry']:.1f} bytes per entry "
        f"({times(report['parquet_bytes_per_entry'], report['bytes_per_entry'])} ours)",
        f"cold, local disk: the file's pages dropped from the page cache first "
        f"({report['cold_resident_fraction']:.0%} resident after the drop, by mincore)",
        f"cold, S3: {report['s3_server']}, +{report['s3_latency_ms']:g} ms per request, "
        f"{report['s3_cold_requests']:g} requests per lookup",
        f"RocksDB ({config['binding']}): Bloom filter {config['bloom_filter_bits_per_key']} "
        f"bits/key, block cache {config['block_cache_bytes'] >> 20:,} MiB with index and "
        f"filter blocks, 16-byte binary keys; its binding's conversion (key list, counting) "
        f"{report['rocksdb_convert_ms']:,.1f} ms more, not in its lookup time",
        f"tagging an upsert of {report['tag_keys']:,} keys in a {report['table_rows']:,}-row "
        f"table: index {report['tag_index_s']:.2f} s, join {report['tag_join_s']:.2f} s "
        f"({times(report['tag_join_s'], report['tag_index_s'])} faster)",
        f"point query by key (median of {len(report['point_index_runs_s'])}, taking turns "
        f"first): index {report['point_index_s'] * 1000:,.1f} ms "
        f"({_ms_spread(report['point_index_runs_s'])}, {report['point_index_files']} file), "
        f"scan {report['point_scan_s'] * 1000:,.1f} ms "
        f"({_ms_spread(report['point_scan_runs_s'])}, {report['point_scan_files']} files)",
    ]
    one_client = report["service_keys_per_s_one_client_by_batch"]
    clients = report["service_clients"]
    largest = max(int(size) for size in one_client)
    lines += [
        "service throughput (keys/s), a `tidemark serve index` process and client processes",
        f"{'':34} {'1 client':>12} {f'{clients} clients':>12}",
        *(
            f"{f'{int(size):,}-key calls':34} {one_client[size]:>12,.0f} {rate:>12,.0f}"
            for size, rate in report["service_keys_per_s_by_batch"].items()
        ),
        f"{f'{largest:,}-key calls, --workers ' + str(report['service_workers']):34} {'':>12} "
        f"{report['service_keys_per_s_workers']:>12,.0f}",
        f"target: 1,000,000 keys/s at 100,000-key calls "
        f"({report['service_keys_per_s'] / SERVICE_TARGET_KEYS_PER_S:.2f}x of it, one process)",
        "References (quoted, not measured)",
        *(
            f"  {reference['what']}: {reference['figure']} ({reference['source']})"
            for reference in report["references"]
        ),
    ]
    return "\n".join(lines)


def readme_rows(result: dict[str, Any]) -> list[ReadmeRow]:
    """The README's rows for one ``bench index --json`` result (every ratio between two
    things measured in that run)."""
    config = result["rocksdb_config"]
    by_batch = result["service_keys_per_s_by_batch"]
    one_client = result["service_keys_per_s_one_client_by_batch"]
    smaller = sorted((int(size) for size in by_batch), reverse=True)[1:]
    return [
        (
            f"`bench index --entries {result['entries']} --batch {result['batch']}` (one "
            f"shard of UUID keys, half of the batch present, --master {result['master']}; "
            f"load average {result['load_average_1m']:.0f}): warm lookup",
            f"{result['warm_ms']:,.1f} ms ({result['warm_cpu_ms']:,.1f} ms CPU)",
            f"RocksDB multi-get {result['rocksdb_ms']:,.1f} ms ({result['rocksdb_cpu_ms']:,.1f} "
            f"ms CPU; {config['binding']}: Bloom filter {config['bloom_filter_bits_per_key']} "
            f"bits/key, {config['block_cache_bytes'] >> 20:,} MiB block cache holding index "
            f"and filter blocks, 16-byte binary keys; its conversion of the keys, "
            f"{result['rocksdb_convert_ms']:,.1f} ms more, not counted)",
            f"{times(result['rocksdb_ms'], result['warm_ms'])} wall, "
            f"{times(result['rocksdb_cpu_ms'], result['warm_cpu_ms'])} CPU",
        ),
        (
            "same: cold lookup from local disk (a new block cache; the file's pages dropped "
            f"from the page cache, {result['cold_resident_fraction']:.0%} resident by mincore)",
            f"{result['cold_ms']:,.1f} ms ({result['cold_cpu_ms']:,.1f} ms CPU)",
            "—",
            "—",
        ),
        (
            f"same: cold lookup from S3 (the moto emulator, +{result['s3_latency_ms']:g} ms "
            f"per request; {result['s3_cold_requests']:g} requests)",
            f"{result['s3_cold_ms']:,.1f} ms",
            "—",
            "—",
        ),
        (
            "same: bytes per entry on storage",
            f"{result['bytes_per_entry']:.1f}",
            f"RocksDB (zstd, compacted) {result['rocksdb_bytes_per_entry']:.1f}; plain zstd "
            f"Parquet {result['parquet_bytes_per_entry']:.1f}",
            f"{times(result['rocksdb_bytes_per_entry'], result['bytes_per_entry'])} / "
            f"{times(result['parquet_bytes_per_entry'], result['bytes_per_entry'])} smaller",
        ),
        (
            f"same: index service throughput in {max(int(size) for size in by_batch):,}-key "
            "calls (a `tidemark serve index` process, client processes on loopback; "
            "target 1M keys/s)",
            f"one process, {result['service_clients']} clients: "
            f"{result['service_keys_per_s']:,.0f} keys/s; `--workers "
            f"{result['service_workers']}`: {result['service_keys_per_s_workers']:,.0f} keys/s; "
            f"one client alone: {result['service_keys_per_s_one_client']:,.0f} keys/s",
            "—",
            "—",
        ),
        (
            f"same: throughput at smaller calls, 1 client / {result['service_clients']} clients",
            "; ".join(
                f"{size:,}-key calls {one_client[str(size)]:,.0f} / "
                f"{by_batch[str(size)]:,.0f} keys/s"
                for size in smaller
            )
            or "—",
            "—",
            "—",
        ),
        (
            f"same: tagging an upsert of {result['tag_keys']:,} keys of a "
            f"{result['table_rows']:,}-row table",
            f"{result['tag_index_s']:.2f} s (`tag_with_index`: Spark tasks ask the index service)",
            f"{result['tag_join_s']:.2f} s join tagging (every base file's keys)",
            times(result["tag_join_s"], result["tag_index_s"]),
        ),
        (
            "same: point query by key",
            f"{result['point_index_s'] * 1000:,.1f} ms, {result['point_index_files']} file opened",
            f"{result['point_scan_s'] * 1000:,.1f} ms, {result['point_scan_files']} files opened",
            times(result["point_scan_s"], result["point_index_s"]),
        ),
    ]


def measure_table(
    spark: SparkSession, args: argparse.Namespace, root: Path, address: str
) -> dict[str, Any]:
    """Parts (d) and (e) on a ``--table-rows`` table bulk-inserted here, indexed from its
    stored keys: tagging 0.1% of its keys with the write path's two taggings (``tag``,
    Spark's join against every base file's keys, vs ``tag_with_index``, executors asking
    the index service), and a point query by key (reading every base
    file vs the one file the index names)."""
    table_uri = str(root / "tagged")
    bulk_insert_generated(spark, generate(spark, args.table_rows), table_uri)
    table = HoodieTable.open(table_uri)
    base_files = table.view().latest_base_files()
    index_table(table, base_files)
    step = max(1, round(1 / UPSERT_FRACTION))
    keyed = spark.range(0, args.table_rows, step).select(
        sf.col("id").cast("string").alias(RECORD_KEY)
    )
    keyed = keyed.cache()
    tagged_keys = keyed.count()

    def join_tagging() -> int:
        existing = existing_keys(spark, table_uri, table.config, base_files)
        return found_count(tag(keyed, existing))

    client = IndexClient(address, table_uri)

    def index_tagging() -> int:
        return found_count(tag_with_index(keyed, client, None))

    runs = max(1, min(3, args.repeat))
    join = [timed(join_tagging) for _ in range(runs + 1)][1:]
    index = [timed(index_tagging) for _ in range(runs + 1)][1:]
    if any(found != tagged_keys for _, found in join + index):
        raise RuntimeError(f"tagging found {join[0][1]} (join) and {index[0][1]} (index) keys")
    keyed.unpersist()
    key = str(args.table_rows // 2)
    scans, lookups = point_queries(table, base_files, client, key, args.repeat)
    return {
        "table_rows": args.table_rows,
        "tag_keys": tagged_keys,
        "tag_join_s": statistics.median(seconds for seconds, _ in join),
        "tag_index_s": statistics.median(seconds for seconds, _ in index),
        "point_scan_s": statistics.median(scans),
        "point_scan_runs_s": scans,
        "point_scan_files": len(base_files),
        "point_index_s": statistics.median(seconds for seconds, _ in lookups),
        "point_index_runs_s": [seconds for seconds, _ in lookups],
        "point_index_files": lookups[0][1],
    }


def found_count(tagged: DataFrame) -> int:
    """Keys tagged with a file group (forces the whole tagging job)."""
    (row,) = tagged.agg(sf.count(OLD_FILE_ID)).collect()
    return int(row[0])


def index_table(table: HoodieTable, base_files: list[BaseFile]) -> None:
    """The record index of ``table`` from its base files' stored keys, in this process."""
    keys, partitions, file_ids, instants = [], [], [], []
    for base in base_files:
        with table.storage.open_input(base.path) as stream:
            stored = pq.read_table(stream, columns=key_source_columns(table.config))
        count = len(stored)
        keys.append(stored_record_keys(stored, table.config))
        partitions.append(pa.array([base.partition_path] * count, pa.string()))
        file_ids.append(pa.array([base.file_id] * count, pa.string()))
        instants.append(pa.array([base.instant] * count, pa.string()))
    last = table.timeline.last_completed()
    assert last is not None
    build_index(
        table.storage,
        *(pa.concat_arrays(column) for column in (keys, partitions, file_ids, instants)),
        as_of=last.timestamp,
    )


def read_rows(table: HoodieTable, base: BaseFile, key: str) -> int:
    with table.storage.open_input(base.path) as stream:
        return len(pq.read_table(stream, filters=[(RECORD_KEY, "=", key)]))


def point_queries(
    table: HoodieTable, base_files: list[BaseFile], client: IndexClient, key: str, runs: int
) -> tuple[list[float], list[tuple[float, int]]]:
    """``runs`` rounds of the point query by scan and through the index, taking turns
    going first: the scans' seconds, and the lookups' seconds and files opened."""
    scans: list[float] = []
    lookups: list[tuple[float, int]] = []
    for round_ in range(runs):
        for by_index in (False, True) if round_ % 2 == 0 else (True, False):
            if by_index:
                seconds, (files, found) = timed(lambda: indexed_point_query(table, client, key))
                lookups.append((seconds, files))
            else:
                seconds, found = timed(lambda: point_query(table, base_files, key))
                scans.append(seconds)
            if found != 1:
                raise RuntimeError(f"point query found {found} rows for key {key}")
    return scans, lookups


def point_query(table: HoodieTable, base_files: list[BaseFile], key: str) -> int:
    """Rows holding ``key``, reading every base file (row groups pruned by statistics)."""
    return sum(read_rows(table, base, key) for base in base_files)


def indexed_point_query(table: HoodieTable, client: IndexClient, key: str) -> tuple[int, int]:
    """Files opened and rows holding ``key``, reading only the file the index names."""
    located = client.lookup([key]).to_pylist()[0]
    if located["file_id"] is None:
        return 0, 0
    partition = [located["partition"]]
    files = [
        base
        for base in table.view().latest_base_files(partition)
        if base.file_id == located["file_id"]
    ]
    return len(files), sum(read_rows(table, base, key) for base in files)
