"""Validation every service applies to the table a request names.

Table paths must be absolute (a relative one would resolve against the service's own
working directory, a phantom tree outside the table) and free of NUL characters (no path
holds one), and are canonicalised (a local path resolved, an S3 URI normalised) before
the allowed-roots check, so ``..`` or a
``file://`` spelling cannot escape the roots (PERMISSION_DENIED). A path that is not a
table (no ``.hoodie/hoodie.properties``) is NOT_FOUND before any service touches it, so
no service ever creates a folder outside a table's own.
"""

from __future__ import annotations

from tidemark.config import ServerConfig
from tidemark.errors import InvalidArgumentError
from tidemark.storage import open_storage
from tidemark.storage.uri import canonical_uri
from tidemark.table.properties import PROPERTIES_PATH
from tidemark.table.table import not_a_table


def table_uri(base_path: str, config: ServerConfig, *, field: str = "table.base_path") -> str:
    """The canonical URI of an existing table, checked against the server's allowed roots.

    Callers cache the answer per base path (a table, once created, stays one); a refusal
    is an exception, which is not cached, so a table created later is accepted."""
    if not base_path.strip():
        raise InvalidArgumentError("must not be empty", field=field)
    if "\x00" in base_path:
        raise InvalidArgumentError("must not contain a NUL character", field=field)
    if "://" not in base_path and not base_path.startswith("/"):
        raise InvalidArgumentError(
            f"must be an absolute path or a URI, got the relative path {base_path!r} (the "
            "service cannot know the writer's working directory)",
            field=field,
        )
    if ".." in base_path.split("/"):
        raise InvalidArgumentError(f"must not contain '..': {base_path!r}", field=field)
    try:
        canonical = canonical_uri(base_path)
    except InvalidArgumentError as error:
        raise InvalidArgumentError(error.message, field=field) from None
    config.check_table_path(canonical, field=field)
    if not open_storage(canonical).exists(PROPERTIES_PATH):
        raise not_a_table(canonical)
    return canonical
