"""Validation every service applies to the table a request names.

Table paths must be absolute (a relative one would resolve against the service's own
working directory, a phantom tree outside the table) and free of NUL characters (no path
holds one), and are canonicalised (a local path resolved, an S3 URI normalised) before
the allowed-roots check, so ``..`` or a
``file://`` spelling cannot escape the roots (PERMISSION_DENIED). A path that is not a
table (no ``.hoodie/hoodie.properties``) is NOT_FOUND before any service touches it, so
no service ever creates a folder outside a table's own. Every answer is checked against
the call's token (``tidemark.rpc.auth.authorize_table``), cached resolutions included.
"""

from __future__ import annotations

import functools

from tidemark.config import ServerConfig
from tidemark.errors import InvalidArgumentError
from tidemark.rpc.auth import Role, authorize_table
from tidemark.storage import open_storage
from tidemark.storage.uri import canonical_uri, refuse_short_file_uri
from tidemark.table import not_a_table
from tidemark.table.properties.config import PROPERTIES_PATH

TABLE_FIELD = "table.base_path"


class TableResolver:
    """``table_uri`` with the resolution cached per base path (a table, once created,
    stays one; a refusal is an exception, not cached, so a table created later is
    accepted) and the call's grant checked every time."""

    def __init__(self, config: ServerConfig) -> None:
        self._resolve = functools.lru_cache(maxsize=1024)(
            functools.partial(resolve_table, config=config)
        )

    def __call__(self, base_path: str, *, role: Role | None = None) -> str:
        """The table's canonical URI; ``role`` raises the one the call's method needs."""
        uri: str = self._resolve(base_path)
        authorize_table(uri, field=TABLE_FIELD, role=role)
        return uri


def table_uri(base_path: str, config: ServerConfig, *, field: str = TABLE_FIELD) -> str:
    """The canonical URI of an existing table the call may touch."""
    uri = resolve_table(base_path, config, field=field)
    authorize_table(uri, field=field)
    return uri


def resolve_table(base_path: str, config: ServerConfig, *, field: str = TABLE_FIELD) -> str:
    """The canonical URI of an existing table, checked against the server's allowed roots."""
    if not base_path.strip():
        raise InvalidArgumentError("must not be empty", field=field)
    if "\x00" in base_path:
        raise InvalidArgumentError("must not contain a NUL character", field=field)
    refuse_short_file_uri(base_path, field=field)
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
    config.check_table_path(canonical, field=field, given=base_path)
    if not open_storage(canonical).exists(PROPERTIES_PATH):
        raise not_a_table(canonical)
    return canonical
