"""The local S3 server's process: moto's app served by Werkzeug on threads, as
``python -m moto.server`` serves it, with conditional writes made atomic.

moto checks a PUT's ``If-None-Match``/``If-Match`` precondition and then stores the object,
as two steps, so two of its threads can both pass the check: two writers both won a
create-if-absent race under load (``tests/storage/test_backends.py``). S3 decides a
conditional write atomically, so here those writes run one at a time; every other request
stays concurrent.
"""

from __future__ import annotations

import argparse
import threading
from collections.abc import Callable, Iterable
from typing import Any

from moto.moto_server.werkzeug_app import (
    DomainDispatcherApplication,
    MotoRequestHandler,
    create_backend_app,
)
from werkzeug.serving import run_simple

WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


class AtomicConditionalWrites:
    """WSGI middleware: a PUT with a precondition runs (and its response is read) under
    one lock."""

    def __init__(self, app: WsgiApp) -> None:
        self._app = app
        self._lock = threading.Lock()

    def __call__(
        self, environ: dict[str, Any], start_response: Callable[..., Any]
    ) -> Iterable[bytes]:
        conditional = environ.get("REQUEST_METHOD") == "PUT" and (
            "HTTP_IF_NONE_MATCH" in environ or "HTTP_IF_MATCH" in environ
        )
        if not conditional:
            return self._app(environ, start_response)
        with self._lock:
            return list(self._app(environ, start_response))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--host", default="127.0.0.1", help="address to bind")
    parser.add_argument("--port", type=int, required=True, help="port to bind")
    args = parser.parse_args()
    app = AtomicConditionalWrites(DomainDispatcherApplication(create_backend_app))
    run_simple(args.host, args.port, app, threaded=True, request_handler=MotoRequestHandler)


if __name__ == "__main__":
    main()
