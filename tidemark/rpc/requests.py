"""Validation every service applies to the table a request names.

Table paths must be absolute (a relative one would resolve against the service's own
working directory, a phantom tree outside the table) and are canonicalised (a local path
resolved, an S3 URI normalised) before the allowed-roots check, so ``..`` or a
``file://`` spelling cannot escape the roots.
"""

from __future__ import annotations

from tidemark.config import ServerConfig
from tidemark.errors import InvalidArgumentError
from tidemark.storage.uri import canonical_uri


def table_uri(base_path: str, config: ServerConfig, *, field: str = "table.base_path") -> str:
    """The canonical URI of the table, checked against the server's allowed roots."""
    if not base_path.strip():
        raise InvalidArgumentError("must not be empty", field=field)
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
    return canonical
