"""``python -m benchmarks index --scale``: the record index's cost curve, by index size and over
commits, through the engine and the index service (no Spark).

Per size (``--sizes``, default 1M, 10M and 100M random UUID keys, shards sized as the
build sizes them):

* build: keys are generated in seeded chunks of ``CHUNK_KEYS``, routed to their shard
  (``shard_of``) and spilled to one Arrow file per shard; then each shard is read back
  and its base file written (``write_base_shard``), and the index published. The build
  runs in a spawned process that reports its peak RSS (``ru_maxrss``): it holds one chunk
  and one shard at a time, so its memory is bounded by the largest shard, not the index
  (the bound is printed: the process's RSS when the build began, plus ``BUILD_CHUNK_MB``
  plus ``BUILD_BYTES_PER_SHARD_ENTRY`` per entry of the largest shard);
* bytes per entry of the base files;
* one 100k-key lookup (half present, random order) through ``RecordIndex.lookup`` over
  every shard: warm (median of ``--repeat`` runs after one untimed, block cache larger
  than the index) and cold (every shard file fsync'ed and dropped from the page cache
  with ``posix_fadvise(DONTNEED)``, a new block cache; median of ``--repeat``);
* service keys/s: one client's 100k-key calls to a ``tidemark serve index`` process;
* upserts, at the smallest size only: commits of ``UPSERT_KEYS`` keys each staged
  through that service with background compaction on, and a warm 100k-key lookup
  through it after 1, 100 and 1,000 of them (``--upserts``), with the most deltas a
  shard had then: the first lookup at once (while a compaction may run beside it), then
  the median of ``--repeat`` once the compaction has caught up (``_settle``).

With ``--keep DIR`` (and ``--upserts none``) each size's table is built under ``DIR`` and
kept, and a later run reuses it with the build figures recorded when it was built
(``build_reused``), so lookups at 100M keys can be measured again without rebuilding.

Goal: lookup time grows no faster than log(keys); ``growth_vs_log`` is the lookup time's
ratio to the smallest size's divided by the ratio of log(keys).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import multiprocessing
import os
import resource
import shutil
import statistics
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc

from benchmarks.index_keys import AS_OF, entry_columns, uuid_keys
from benchmarks.load import bench_table_config
from tidemark.clients.index import IndexClient
from tidemark.errors import InvalidArgumentError
from tidemark.index import layout
from tidemark.index.block_cache import BlockCache
from tidemark.index.build import publish_index, shard_count_for, write_base_shard
from tidemark.index.record_index import COMPACT_AFTER_DELTAS, RecordIndex
from tidemark.index.sharding import group_by_shard, shard_of
from tidemark.logs import configure_logging
from tidemark.rpc.process import ServeProcess
from tidemark.storage import LocalStorage
from tidemark.table import HoodieTable
from tidemark.table.metadata.actions import COMMIT
from tidemark.table.timeline.instant import new_instant_time
from tidemark.table.timeline.layout1 import Timeline

DEFAULT_SIZES = (1_000_000, 10_000_000, 100_000_000)
CHUNK_KEYS = 1_000_000
"""Keys generated, routed and spilled at a time by the build."""
SERVICE_CALLS = 20
"""Timed 100k-key calls of the service measurement (after one untimed)."""
BUILD_RECORD = "build.json"
"""The build's figures, kept beside a table built by ``--keep``."""
UPSERT_CHECKPOINTS = (1, 100, 1_000)
UPSERT_KEYS = 10
SETTLE_S = 120.0
"""The longest wait for the background compaction to catch up before timed lookups."""
CACHE_BYTES_PER_ENTRY = 64
"""Block cache budget per entry for warm lookups: decoded blocks take about 20 bytes per
UUID entry, so every block of the index stays cached."""
BUILD_CHUNK_MB = 200
"""The bound on the build's RSS: what the process held when the build began (the
interpreter and its libraries, measured), plus this much for one chunk ..."""
BUILD_BYTES_PER_SHARD_ENTRY = 400
"""... plus this much per entry of the largest shard (its keys, sorted copies and the
encoded file)."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags of ``--scale`` (``bench_index`` registers them and dispatches here)."""
    parser.add_argument(
        "--scale",
        action="store_true",
        help="the cost curve: build and query indexes of --sizes keys, and lookups over "
        "1, 100 and 1,000 small upserts (engine and service, no Spark)",
    )
    parser.add_argument(
        "--sizes",
        type=_sizes,
        default=DEFAULT_SIZES,
        metavar="N,N,...",
        help="index sizes in keys for --scale (default 1000000,10000000,100000000)",
    )
    parser.add_argument(
        "--upserts",
        type=_checkpoints,
        default=UPSERT_CHECKPOINTS,
        metavar="N,N,...",
        help="for --scale: look up after this many upsert commits (default 1,100,1000; "
        "'none' skips them)",
    )
    parser.add_argument(
        "--keep",
        type=Path,
        metavar="DIR",
        help="for --scale with --upserts none: build each size's index under DIR and keep "
        "it; a later run with the same DIR reuses it (and reports the build figures "
        "measured when it was built, marked build_reused)",
    )


def _counts(text: str, least: int = 1) -> tuple[int, ...]:
    """Distinct integers of at least ``least``, ascending, from "a,b,c"."""
    try:
        counts = tuple(sorted({int(part) for part in text.split(",")}))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"not a comma-separated list of integers: {text!r}"
        ) from None
    if counts[0] < least:
        raise argparse.ArgumentTypeError(f"each must be at least {least}: {text!r}")
    return counts


def _checkpoints(text: str) -> tuple[int, ...]:
    return () if text == "none" else _counts(text)


def _sizes(text: str) -> tuple[int, ...]:
    return _counts(text, least=1_000)


def run(args: argparse.Namespace) -> int:
    configure_logging(json=False, level="warning")
    if args.batch > min(args.sizes):
        raise InvalidArgumentError(
            f"must not exceed the smallest size {min(args.sizes)}", field="batch"
        )
    if args.keep is not None and args.upserts:
        raise InvalidArgumentError(
            "needs --upserts none: upserts change the kept table", field="keep"
        )
    if args.keep is not None:
        args.keep.mkdir(parents=True, exist_ok=True)
        result = measure(args.sizes, args.upserts, args.batch, args.repeat, args.keep, keep=True)
    else:
        root = Path(tempfile.mkdtemp(prefix="tidemark-bench-index-scale-"))
        try:
            result = measure(args.sizes, args.upserts, args.batch, args.repeat, root)
        finally:
            shutil.rmtree(root, ignore_errors=True)
    print(format_report(result))
    if args.json:
        print(json.dumps(result))
    return 0


def measure(
    sizes: tuple[int, ...],
    upserts_at: tuple[int, ...],
    batch: int,
    repeat: int,
    root: Path,
    *,
    keep: bool = False,
) -> dict[str, Any]:
    rows = []
    upserts: dict[str, Any] = {}
    for entries in sizes:
        table_uri = str(root / f"table-{entries}")
        row = {"entries": entries, **_built(table_uri, entries)}
        storage = LocalStorage(table_uri)
        lookup_keys = _batch(entries, batch)
        row.update(_lookups(storage, lookup_keys, repeat, entries))
        with _service(entries) as address:
            client = IndexClient(address, table_uri, batch_keys=batch)
            row["service_keys_per_s"] = _service_rate(client, lookup_keys)
            if upserts_at and not upserts:
                upserts = _upserts(storage, client, lookup_keys, entries, upserts_at, repeat)
        rows.append(row)
        if not keep:
            shutil.rmtree(table_uri, ignore_errors=True)
    smallest = rows[0]
    for row in rows:
        log_ratio = math.log(row["entries"]) / math.log(smallest["entries"])
        row["warm_growth_vs_log"] = row["warm_ms"] / smallest["warm_ms"] / log_ratio
        row["cold_growth_vs_log"] = row["cold_ms"] / smallest["cold_ms"] / log_ratio
    return {
        "bench": "index-scale",
        "batch": batch,
        "repeat": repeat,
        "cpus": os.cpu_count(),
        "sizes": rows,
        "upserts": upserts,
    }


def _chunk(entries: int, number: int) -> pa.Array:
    """Chunk ``number`` of the index's keys: regenerated identically from its seed."""
    count = min(CHUNK_KEYS, entries - number * CHUNK_KEYS)
    return uuid_keys(count, np.random.default_rng([2024, number]))


def _batch(entries: int, batch: int) -> pa.Array:
    """``batch`` keys in random order, half of them in the index (from random chunks)."""
    rng = np.random.default_rng(7)
    chunks = math.ceil(entries / CHUNK_KEYS)
    present = batch // 2
    picked = [
        _chunk(entries, number).take(pa.array(rng.choice(min(CHUNK_KEYS, entries), n, False)))
        for number, n in enumerate(np.bincount(rng.integers(0, chunks, present), None, chunks))
        if n
    ]
    keys = pa.concat_arrays([*picked, uuid_keys(batch - present, rng)])
    return keys.take(pa.array(rng.permutation(len(keys))))


def _built(table_uri: str, entries: int) -> dict[str, Any]:
    """The build's figures: measured now, or read back from a kept table built earlier
    (``build.json`` is written once its build finished; an unfinished one is rebuilt)."""
    record = Path(table_uri) / BUILD_RECORD
    if record.exists():
        return {**json.loads(record.read_text()), "build_reused": True}
    shutil.rmtree(table_uri, ignore_errors=True)
    HoodieTable.create(table_uri, bench_table_config())
    result = _build_in_child(table_uri, entries)
    record.write_text(json.dumps(result))
    return {**result, "build_reused": False}


def _build_in_child(table_uri: str, entries: int) -> dict[str, Any]:
    """The build in a spawned process, so its peak RSS is the build's alone."""
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        result: dict[str, Any] = pool.apply(build, (table_uri, entries))
    return result


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def build(table_uri: str, entries: int) -> dict[str, Any]:
    """Spill the chunks by shard, then write each shard's base file; the build's time,
    its peak RSS and bound, the largest shard and the bytes per entry."""
    began = time.perf_counter()
    start_rss_mb = _peak_rss_mb()
    storage = LocalStorage(table_uri)
    shards = shard_count_for(entries)
    spill = Path(table_uri) / "spill"
    spill.mkdir()
    schema = pa.schema([("key", pa.string())])
    writers = [ipc.new_file(spill / f"{shard}.arrow", schema) for shard in range(shards)]
    for number in range(math.ceil(entries / CHUNK_KEYS)):
        keys = _chunk(entries, number)
        order, bounds = group_by_shard(shard_of(keys, shards), shards)
        for shard, writer in enumerate(writers):
            rows = order[bounds[shard] : bounds[shard + 1]]
            writer.write_table(pa.table({"key": keys.take(pa.array(rows))}))
    for writer in writers:
        writer.close()
    largest = 0
    for shard in range(shards):
        with pa.memory_map(str(spill / f"{shard}.arrow")) as source:
            table = ipc.open_file(source).read_all()
        keys = table["key"].combine_chunks()
        columns = entry_columns(keys)
        largest = max(largest, len(keys))
        write_base_shard(
            storage,
            shard,
            shards,
            keys,
            columns["partition"],
            columns["file_id"],
            columns["instant"],
            AS_OF,
        )
        del table, keys, columns
        (spill / f"{shard}.arrow").unlink()
    publish_index(storage, shards, AS_OF)
    build_s = time.perf_counter() - began
    size = sum(info.size for info in storage.list(layout.SHARDS_DIR + "/"))
    return {
        "shards": shards,
        "build_s": build_s,
        "build_start_rss_mb": start_rss_mb,
        "build_peak_rss_mb": _peak_rss_mb(),
        "build_rss_bound_mb": (
            start_rss_mb + BUILD_CHUNK_MB + BUILD_BYTES_PER_SHARD_ENTRY * largest / 2**20
        ),
        "largest_shard_entries": largest,
        "bytes_per_entry": size / entries,
    }


def _lookups(storage: LocalStorage, keys: pa.Array, repeat: int, entries: int) -> dict[str, Any]:
    """Warm and cold lookups of ``keys`` over the whole index (medians, ms)."""
    index = RecordIndex.open(storage, BlockCache(max(256 << 20, CACHE_BYTES_PER_ENTRY * entries)))
    found = len(keys) - index.lookup(keys)["partition"].null_count
    warm = [_timed(lambda: index.lookup(keys)) for _ in range(repeat)]
    cold = []
    for _ in range(repeat):
        drop_page_cache(storage)
        fresh = RecordIndex.open(storage, BlockCache())
        cold.append(_timed(lambda fresh=fresh: fresh.lookup(keys)))
    return {
        "found": found,
        "warm_ms": statistics.median(warm) * 1000,
        "cold_ms": statistics.median(cold) * 1000,
    }


def drop_page_cache(storage: LocalStorage) -> None:
    """Make every shard file cold: flushed, then its pages dropped from the OS cache."""
    for info in storage.list(layout.SHARDS_DIR + "/"):
        fd = os.open(storage.root / info.path, os.O_RDONLY)
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


@contextlib.contextmanager
def _service(entries: int) -> Iterator[str]:
    """A ``tidemark serve index`` process with a block cache larger than the index and
    background compaction checking every second."""
    env = {
        "TIDEMARK_INDEX_BLOCK_CACHE_BYTES": str(max(256 << 20, CACHE_BYTES_PER_ENTRY * entries)),
        "TIDEMARK_INDEX_COMPACT_INTERVAL_S": "1",
    }
    server = ServeProcess("index", env=env)
    try:
        yield server.address
    finally:
        server.close()


def _service_rate(client: IndexClient, keys: pa.Array) -> float:
    client.lookup(keys)
    began = time.perf_counter()
    for _ in range(SERVICE_CALLS):
        client.lookup(keys)
    return SERVICE_CALLS * len(keys) / (time.perf_counter() - began)


def _upserts(
    storage: LocalStorage,
    client: IndexClient,
    keys: pa.Array,
    entries: int,
    checkpoints: tuple[int, ...],
    repeat: int,
) -> dict[str, Any]:
    """Commits of ``UPSERT_KEYS`` existing keys moved to a new file group, each staged
    through the service (background compaction on) and completed on the timeline; a warm
    lookup of ``keys`` after each checkpoint."""
    timeline = Timeline(storage)
    rng = np.random.default_rng(11)
    chunk = _chunk(entries, 0)
    after = []
    done = 0
    for checkpoint in checkpoints:
        while done < checkpoint:
            instant = new_instant_time(timeline.latest_timestamp())
            timeline.create_requested(instant, COMMIT)
            timeline.transition_inflight(instant, COMMIT)
            moved = chunk.take(pa.array(rng.choice(len(chunk), UPSERT_KEYS, False)))
            client.stage(
                instant,
                pa.table(
                    {
                        "key": moved,
                        "partition": pa.array(["dt=2024-02-01"] * UPSERT_KEYS),
                        "file_id": pa.array([f"upsert-{done}-0"] * UPSERT_KEYS),
                    }
                ),
            )
            timeline.complete(instant, COMMIT, b"{}")
            done += 1
        latest = timeline.latest_timestamp()
        first = _timed(lambda latest=latest: client.lookup(keys, as_of=latest))
        backlog = client.stats().max_shard_deltas
        settle_s = _settle(client)
        client.lookup(keys, as_of=latest)
        runs = [
            _timed(lambda latest=latest: client.lookup(keys, as_of=latest)) for _ in range(repeat)
        ]
        stats = client.stats()
        after.append(
            {
                "upserts": done,
                "first_lookup_ms": first * 1000,
                "max_shard_deltas_at_first": backlog,
                "settle_s": settle_s,
                "lookup_ms": statistics.median(runs) * 1000,
                "max_shard_deltas": stats.max_shard_deltas,
                "delta_files": stats.delta_files,
            }
        )
    return {"entries": entries, "keys_per_upsert": UPSERT_KEYS, "after": after}


def _settle(client: IndexClient) -> float:
    """Seconds until the service's background compaction has caught up (no shard with
    ``COMPACT_AFTER_DELTAS`` visible deltas), at most ``SETTLE_S``: the timed lookups then
    measure what a lookup costs over the deltas compaction bounds, not the CPU a
    compaction still running takes from it (the first lookup, timed apart, shows that)."""
    began = time.perf_counter()
    while (
        client.stats().max_shard_deltas >= COMPACT_AFTER_DELTAS
        and time.perf_counter() - began < SETTLE_S
    ):
        time.sleep(1.0)
    return time.perf_counter() - began


def _timed(fn: Any) -> float:
    began = time.perf_counter()
    fn()
    return time.perf_counter() - began


def format_report(result: dict[str, Any]) -> str:
    rows = result["sizes"]
    labels = [f"{row['entries']:,}" for row in rows]
    lines = [
        f"record index cost curve ({result['batch']:,}-key lookups, half present; "
        f"medians of {result['repeat']}; {result['cpus']} CPUs)",
        _line("keys", labels),
    ]
    for name, key, fmt in [
        ("shards", "shards", "{:,}"),
        ("build s", "build_s", "{:.1f}"),
        ("build peak RSS MB", "build_peak_rss_mb", "{:,.0f}"),
        ("  bound MB", "build_rss_bound_mb", "{:,.0f}"),
        ("bytes per entry", "bytes_per_entry", "{:.1f}"),
        ("warm lookup ms", "warm_ms", "{:.1f}"),
        ("  vs log(keys)", "warm_growth_vs_log", "{:.2f}x"),
        ("cold lookup ms", "cold_ms", "{:.1f}"),
        ("  vs log(keys)", "cold_growth_vs_log", "{:.2f}x"),
        ("service keys/s", "service_keys_per_s", "{:,.0f}"),
    ]:
        lines.append(_line(name, [fmt.format(row[key]) for row in rows]))
    upserts = result["upserts"]
    if upserts:
        lines.append(
            f"lookups over commits ({upserts['entries']:,} keys, "
            f"{upserts['keys_per_upsert']} keys per upsert, background compaction on)"
        )
        lines.append(_line("upserts", [f"{a['upserts']:,}" for a in upserts["after"]]))
        lines.append(
            _line("first lookup ms", [f"{a['first_lookup_ms']:.1f}" for a in upserts["after"]])
        )
        lines.append(
            _line(
                "  max deltas/shard",
                [str(a["max_shard_deltas_at_first"]) for a in upserts["after"]],
            )
        )
        lines.append(_line("settled after s", [f"{a['settle_s']:.1f}" for a in upserts["after"]]))
        lines.append(_line("lookup ms", [f"{a['lookup_ms']:.1f}" for a in upserts["after"]]))
        lines.append(
            _line("max deltas/shard", [str(a["max_shard_deltas"]) for a in upserts["after"]])
        )
    return "\n".join(lines)


def _line(name: str, cells: list[str]) -> str:
    return f"{name:<20}" + "".join(f"{cell:>16}" for cell in cells)


def readme_rows(result: dict[str, Any]) -> list[tuple[str, str, str, str]]:
    """(benchmark, Tidemark, baseline, ratio) rows of one ``--json`` result for the README:
    each size against the smallest, and lookups after many upserts against after one."""
    rows = result["sizes"]
    smallest = rows[0]
    out = []
    for row in rows[1:]:
        scale = row["entries"] / smallest["entries"]
        for label, key in [("warm", "warm_ms"), ("cold", "cold_ms")]:
            out.append(
                (
                    f"{label} {result['batch']:,}-key lookup, {row['entries']:,} vs "
                    f"{smallest['entries']:,} keys ({scale:g}x keys, log ratio "
                    f"{math.log(row['entries']) / math.log(smallest['entries']):.2f})",
                    f"{row[key]:.1f} ms",
                    f"{smallest[key]:.1f} ms",
                    f"{row[key] / smallest[key]:.2f}x",
                )
            )
    after = result["upserts"].get("after", []) if result["upserts"] else []
    if len(after) > 1:
        first, last = after[0], after[-1]
        out.append(
            (
                f"lookup after {last['upserts']:,} vs {first['upserts']:,} upserts "
                f"({result['upserts']['entries']:,} keys, compaction on)",
                f"{last['lookup_ms']:.1f} ms",
                f"{first['lookup_ms']:.1f} ms",
                f"{last['lookup_ms'] / first['lookup_ms']:.2f}x",
            )
        )
    return out
