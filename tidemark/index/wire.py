"""The record index's Arrow columns, wherever they travel: a lookup's answer (a key and its
location: partition, file id, and the instant of the file), a write's staged changes (a
key and its new location; both null is a delete, a tombstone) and the keys a request
carries. The service, its client, the index files and the Spark jobs all name them here.
"""

from __future__ import annotations

import pyarrow as pa

KEY = "key"
PARTITION = "partition"
FILE_ID = "file_id"
INSTANT = "instant"
LOCATION_COLUMNS = (PARTITION, FILE_ID, INSTANT)
"""A key's location, as a lookup answers it (all null: the key is not in the table)."""
LOOKUP_COLUMNS = (KEY, *LOCATION_COLUMNS)
CHANGE_COLUMNS = (KEY, PARTITION, FILE_ID)
"""A staged change: the instant of the file is the staging write's own."""
CHANGES = pa.schema([(name, pa.string()) for name in CHANGE_COLUMNS])
CHANGES_DDL = ", ".join(f"{name} string" for name in CHANGE_COLUMNS)
"""``CHANGES`` as the Spark schema of a write's changes."""
