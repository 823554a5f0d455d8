"""One Spark executor's share of a write, as a process: a thread per marker dir (instant)
creates markers one call each, as write tasks do, through the marker address it is given
(the Service's ``dns:///`` name); or, with ``list``, every marker of each instant read back
through that address. Run by test_chart_dns.py inside the harness's cluster-like name
resolution, so it resolves the names a pod would. Prints one JSON line; logs (JSON,
debug: the client's owner redirects) go to stderr. ``create`` prints ``ready`` once set up
and starts on a line on stdin, so that the test starts every executor at once (none
creating while another still imports).

    python marker_load.py create ADDRESS TABLE INSTANT,... MARKERS TAG
    python marker_load.py list ADDRESS TABLE INSTANT,...
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time

from tidemark.clients.marker import ServiceMarkerReader, ServiceMarkerWriter, check_reachable
from tidemark.config import ClientConfig
from tidemark.logs import configure_logging
from tidemark.table.writes.markers import IOType, MarkerSpec

CLIENT_LOG_EVENTS = ("marker dir owner named", "marker dir owner unreachable")
"""The client's log lines about owners: a redirect followed, an owner it could not reach."""


def create(address: str, table: str, instants: list[str], markers: int, tag: str) -> dict:
    """Each instant's ``markers`` creates, all instants at once; their latencies (s)."""
    config = ClientConfig.from_env(os.environ)
    latencies: list[float] = []
    errors: list[str] = []
    lock = threading.Lock()
    start = threading.Barrier(len(instants))

    def write(instant: str) -> None:
        writer = ServiceMarkerWriter(MarkerSpec("service", table, instant, address), config)
        start.wait()
        for i in range(markers):
            began = time.perf_counter()
            try:
                writer.create(f"p={tag}", f"f{tag}-{i}.parquet", IOType.CREATE)
            except Exception as error:  # reported, and the test fails on it
                with lock:
                    errors.append(f"{type(error).__name__}: {error}")
                return
            with lock:
                latencies.append(time.perf_counter() - began)

    threads = [threading.Thread(target=write, args=(instant,)) for instant in instants]
    check_reachable(address, config)  # connected to the Service, as after a first call
    print("ready", flush=True)
    sys.stdin.readline()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return {"latencies": latencies, "errors": errors}


def listed(address: str, table: str, instants: list[str]) -> dict:
    reader = ServiceMarkerReader(address, table, ClientConfig.from_env(os.environ))
    return {instant: sorted(reader.all_markers(instant)) for instant in instants}


def main(argv: list[str]) -> None:
    configure_logging(json=True, level="debug")
    mode, address, table, instants = argv[0], argv[1], argv[2], argv[3].split(",")
    if mode == "create":
        result = create(address, table, instants, int(argv[4]), argv[5])
    else:
        result = listed(address, table, instants)
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
