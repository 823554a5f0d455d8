"""Compaction plans: ``<t>.compaction.requested`` holds one Avro ``HoodieCompactionPlan``
(hudi-common's ``HoodieCompactionPlan.avsc``, version 2, as Hudi 0.14 and 1.x write it on
every table version): per file slice to compact, its base instant, base file and log
files. ``plans.compaction`` decodes and makes them (the cleaner keeps the slices a pending
compaction needs), and archival carries a requested plan into the archive."""

from __future__ import annotations

from typing import Any

import fastavro
from fastavro.types import Schema

from tidemark.table.metadata.avro import NAMESPACE, STRINGS, VERSION_FIELD, read_single_record

_OPTIONAL_STRING = ["null", "string"]
_STRING_MAP = ["null", {"type": "map", "values": "string"}]

COMPACTION_PLAN: dict[str, Any] = {
    "type": "record",
    "name": "HoodieCompactionPlan",
    "namespace": NAMESPACE,
    "fields": [
        {
            "name": "operations",
            "type": [
                "null",
                {
                    "type": "array",
                    "items": {
                        "type": "record",
                        "name": "HoodieCompactionOperation",
                        "fields": [
                            {"name": "baseInstantTime", "type": _OPTIONAL_STRING},
                            {"name": "deltaFilePaths", "type": ["null", STRINGS], "default": None},
                            {"name": "dataFilePath", "type": _OPTIONAL_STRING, "default": None},
                            {"name": "fileId", "type": _OPTIONAL_STRING},
                            {"name": "partitionPath", "type": _OPTIONAL_STRING, "default": None},
                            {
                                "name": "metrics",
                                "type": ["null", {"type": "map", "values": "double"}],
                                "default": None,
                            },
                            {
                                "name": "bootstrapFilePath",
                                "type": _OPTIONAL_STRING,
                                "default": None,
                            },
                        ],
                    },
                },
            ],
            "default": None,
        },
        {"name": "extraMetadata", "type": _STRING_MAP, "default": None},
        VERSION_FIELD,
        {
            "name": "strategy",
            "type": [
                "null",
                {
                    "type": "record",
                    "name": "HoodieCompactionStrategy",
                    "fields": [
                        {"name": "compactorClassName", "type": _OPTIONAL_STRING, "default": None},
                        {"name": "strategyParams", "type": _STRING_MAP, "default": None},
                        VERSION_FIELD,
                    ],
                },
            ],
            "default": None,
        },
        {"name": "preserveHoodieMetadata", "type": ["boolean", "null"], "default": False},
        {"name": "missingSchedulePartitions", "type": ["null", STRINGS], "default": None},
    ],
}
COMPACTION_PLAN_SCHEMA: Schema = fastavro.parse_schema(COMPACTION_PLAN)


def read_compaction_plan(data: bytes) -> dict[str, Any]:
    """The ``HoodieCompactionPlan`` record of a ``compaction.requested`` file."""
    return read_single_record(COMPACTION_PLAN_SCHEMA, data, "compaction plan")
