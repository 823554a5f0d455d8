"""Deletes by key: the record key columns are all a delete needs.

A delete input may be just the key columns (for a partitioned table the partition columns
may be there too, and any others): only the record key is kept. Where each key lives comes
from the table, not from the input: tagging (``spark_jobs.tagging``, Hudi's global simple
index) joins the keys with the latest base files and gives each its partition path and file
group, so partition columns are optional and their values play no part.

Rows of any other operation whose Hudi delete flag (``_hoodie_is_deleted``) is true are
deletes too, as Hudi's payloads treat them: an upsert (or an insert tagged by the record
index) deletes the key where the table holds it (``buckets.route``), and bulk_insert and
insert_overwrite, which do not look keys up, leave such rows out (``without_deleted``).
"""

from __future__ import annotations

from dataclasses import replace

from pyspark.sql import DataFrame
from pyspark.sql import functions as sf

from tidemark.jobs.keying import check_fields, column, with_keys
from tidemark.table.properties.config import TableConfig
from tidemark.table.records.keys import IS_DELETED


def delete_keys(data: DataFrame, config: TableConfig) -> DataFrame:
    """A keyed row per row of ``data``, with only the key columns (the writer de-duplicates
    them when the validation counted duplicate keys); the partition path is left empty (the
    key's location is found by tagging)."""
    key_config = replace(config, partition_fields=(), precombine_field=None)
    check_fields(data, key_config)
    keys = data.select(*[column(name) for name in config.record_key_fields])
    return with_keys(keys, key_config)


def without_deleted(rows: DataFrame) -> DataFrame:
    """``rows`` less those flagged deleted (a null flag is false, as in Hudi)."""
    if IS_DELETED not in rows.columns:
        return rows
    return rows.where(~sf.coalesce(column(IS_DELETED), sf.lit(False)))
