"""Arrow <-> Avro schemas in Hudi's style, and the schema evolution Hudi would accept.

Hudi stores the writer schema as Avro JSON in every commit (``extraMetadata.schema``) and
in ``hoodie.table.create.schema``: a record ``<table>_record`` in namespace
``hoodie.<table>``, every field a ``["null", type]`` union defaulting to null.

Timestamps are instants (``timestamp-micros``, Arrow timestamps with a time zone). A naive
timestamp is refused rather than relabelled: Hudi's ``local-timestamp-micros`` is what it
is, but hudi-rs cannot read that type, and ``timestamp-micros`` would make it UTC.
"""

from __future__ import annotations

import json
from collections.abc import Collection
from typing import Any

import pyarrow as pa

from tidemark.errors import InvalidArgumentError
from tidemark.table.records.avro_names import avro_name
from tidemark.table.records.keys import META_COLUMNS

_PRIMITIVES: dict[str, pa.DataType] = {
    "boolean": pa.bool_(),
    "int": pa.int32(),
    "long": pa.int64(),
    "float": pa.float32(),
    "double": pa.float64(),
    "string": pa.string(),
    "bytes": pa.binary(),
}
NAIVE_TIMESTAMPS = (
    "timestamps without a time zone cannot be written: Hudi declares them "
    "local-timestamp-micros, which hudi-rs cannot read, and declaring them timestamp-micros "
    "would make them instants in UTC; give the column a time zone first (e.g. UTC)"
)
_WIDENINGS = {
    "int": {"long", "float", "double"},
    "long": {"float", "double"},
    "float": {"double"},
    "string": {"bytes"},
    "bytes": {"string"},
}


def arrow_to_avro_schema(schema: pa.Schema, table_name: str) -> str:
    """Hudi's Avro record JSON for the data columns (meta columns are left out); the record
    name comes from the table name made an Avro name, as Hudi does."""
    name = avro_name(table_name)
    namespace = f"hoodie.{name}"
    record = _record(
        f"{name}_record",
        namespace,
        [f for f in schema if f.name not in META_COLUMNS],
    )
    return json.dumps(record, separators=(",", ":"))


def with_meta_fields(avro_json: str) -> str:
    """The Avro record JSON with Hudi's five meta fields first, as Hudi writes the schema of
    a log block (its records carry their key and partition in them)."""
    record = _parse(avro_json)
    meta = [
        {"name": name, "type": ["null", "string"], "doc": "", "default": None}
        for name in META_COLUMNS
    ]
    data = [f for f in record["fields"] if f["name"] not in META_COLUMNS]
    return json.dumps({**record, "fields": [*meta, *data]}, separators=(",", ":"))


def avro_to_arrow_schema(avro_json: str) -> pa.Schema:
    record = _parse(avro_json)
    return pa.schema([_arrow_field(field) for field in record["fields"]])


def evolve_schema(
    old_avro: str,
    new_arrow: pa.Schema,
    *,
    protected_fields: Collection[str] = (),
    fill_missing: bool = False,
) -> pa.Schema:
    """The schema to write incoming data with, or an error naming the field (``a.b`` for a
    nested one) where Hudi would refuse the change.

    Accepted, as in Hudi: columns and nested struct fields added (always nullable here);
    incoming types narrower than the table's (int -> long/float/double, long ->
    float/double, float -> double, string <-> bytes, a decimal the table's decimal
    holds), which the result promotes to the table's type; a table type widened by the
    incoming one (Hudi's ``SchemaChangeUtils.isTypeUpdateAllow``: for decimals, a wider
    one, or more precision at the same scale). With ``fill_missing`` (Hudi's
    ``hoodie.write.set.null.for.missing.columns``) a top-level column the input lacks is
    kept, after the input's columns, to be written as nulls. Refused: other dropped
    (nested) fields, narrowing or incompatible changes, and any type change of
    ``protected_fields`` (record key and partition fields) other than an incoming integer
    promoted to the table's wider integer, whose key string stays the same.
    """
    old_fields = _parse(old_avro)["fields"]
    evolved = _evolve_fields(old_fields, list(new_arrow), "", frozenset(protected_fields))
    missing = [field for field in old_fields if field["name"] not in new_arrow.names]
    if missing and not fill_missing:
        raise _dropped(missing[0]["name"])
    return pa.schema(evolved + [_arrow_field(field) for field in missing])


SET_NULL_FOR_MISSING_COLUMNS = "set_null_for_missing_columns"
"""The write option filling missing columns (``--set-null-for-missing-columns``)."""


def _dropped(path: str, *, nested: bool = False) -> InvalidArgumentError:
    """The refusal of an input lacking a column, with the two ways on."""
    if nested:
        fill = "give the input the field (null where it has no value)"
    else:
        fill = (
            f"write it as null with {SET_NULL_FOR_MISSING_COLUMNS}=True "
            "(--set-null-for-missing-columns; Hudi's hoodie.write.set.null.for.missing.columns)"
        )
    return InvalidArgumentError(
        f"column was dropped from the schema: the input lacks it; {fill}, or remove it "
        "for good by rewriting the table without it (read it, drop the column, bulk_insert "
        "into a new table): Tidemark never drops a column in place",
        field=path,
    )


def _evolve_fields(
    old_fields: list[dict[str, Any]],
    new_fields: list[pa.Field],
    prefix: str,
    protected: frozenset[str],
) -> list[pa.Field]:
    """``new_fields`` evolved against the table's; the top level's missing fields are the
    caller's to judge, a struct's are refused here."""
    by_name = {field.name: field for field in new_fields if field.name not in META_COLUMNS}
    evolved = {field.name: field for field in new_fields}
    for old_field in old_fields:
        path = f"{prefix}{old_field['name']}"
        new_field = by_name.get(old_field["name"])
        if new_field is None:
            if prefix:
                raise _dropped(path, nested=True)
            continue
        kind = _evolve_type(_non_null(old_field["type"]), new_field.type, path, path in protected)
        evolved[new_field.name] = new_field.with_type(kind)
    return [evolved[field.name] for field in new_fields]


def _evolve_type(old: Any, new: pa.DataType, path: str, protected: bool) -> pa.DataType:
    """``new``, with nested fields evolved and a narrower type promoted to ``old``."""
    old_kind = old.get("type") if isinstance(old, dict) else None
    if old_kind == "record" and pa.types.is_struct(new):
        children = [new.field(i) for i in range(new.num_fields)]
        return pa.struct(_evolve_fields(old["fields"], children, f"{path}.", frozenset()))
    if old_kind == "array" and (pa.types.is_list(new) or pa.types.is_large_list(new)):
        items = _evolve_type(_non_null(old["items"]), new.value_type, f"{path}.element", False)
        return pa.list_(new.value_field.with_type(items))
    if old_kind == "map" and pa.types.is_map(new):
        values = _evolve_type(_non_null(old["values"]), new.item_type, f"{path}.value", False)
        return pa.map_(new.key_field, new.item_field.with_type(values))
    new_avro = _avro_type(new, path, "evolution")
    if _shape(old) == _shape(new_avro):
        return new
    primitive = isinstance(old, str) and isinstance(new_avro, str)
    promoted = primitive and old in _WIDENINGS.get(new_avro, set())
    if protected and not (promoted and pa.types.is_integer(_PRIMITIVES[old])):
        raise InvalidArgumentError(
            "the type of a record key or partition field cannot change "
            f"({_describe(old)} -> {_describe(new_avro)})",
            field=path,
        )
    if promoted:
        return _PRIMITIVES[old]
    if primitive and new_avro in _WIDENINGS.get(old, set()):
        return new
    if _is_decimal(old) and _is_decimal(new_avro):
        if _holds(old, new_avro):
            return pa.decimal128(old["precision"], old.get("scale", 0))
        if _holds(new_avro, old):
            return new
    if _is_timestamp(old) and _is_timestamp(new_avro) and _is_local(old) != _is_local(new_avro):
        raise InvalidArgumentError(
            f"the column holds {_TIMESTAMP_KINDS[_is_local(old)]}, the input "
            f"{_TIMESTAMP_KINDS[_is_local(new_avro)]}: {_describe(old)} -> "
            f"{_describe(new_avro)} is not allowed; convert the input's timestamps first",
            field=path,
        )
    raise InvalidArgumentError(
        f"type change {_describe(old)} -> {_describe(new_avro)} is not allowed; cast the "
        f"input's column to {_describe(old)}",
        field=path,
    )


_TIMESTAMP_KINDS = {
    False: "instants (with a time zone)",
    True: "local date-times (without a time zone)",
}


def _is_decimal(avro: Any) -> bool:
    return isinstance(avro, dict) and avro.get("logicalType") == "decimal"


def _holds(wide: dict[str, Any], narrow: dict[str, Any]) -> bool:
    """Whether decimal ``wide`` holds every value of ``narrow`` exactly: Hudi's rule, at
    least as many digits after the point and at least as many before it (so more
    precision at the same scale)."""
    wide_scale, narrow_scale = wide.get("scale", 0), narrow.get("scale", 0)
    return (
        wide_scale >= narrow_scale
        and wide["precision"] - wide_scale >= narrow["precision"] - narrow_scale
    )


def _is_timestamp(avro: Any) -> bool:
    return isinstance(avro, dict) and "timestamp-" in str(avro.get("logicalType"))


def _is_local(avro: Any) -> bool:
    return str(avro.get("logicalType")).startswith("local-")


def _record(name: str, namespace: str, fields: list[pa.Field]) -> dict[str, Any]:
    return {
        "type": "record",
        "name": name,
        "namespace": namespace,
        "fields": [
            {
                "name": field.name,
                "type": ["null", _avro_type(field.type, field.name, f"{namespace}.{name}")],
                "default": None,
            }
            for field in fields
        ],
    }


def _avro_type(kind: pa.DataType, name: str, namespace: str) -> Any:
    if pa.types.is_boolean(kind):
        return "boolean"
    if pa.types.is_integer(kind):
        return "long" if kind.bit_width == 64 else "int"
    if pa.types.is_float32(kind) or pa.types.is_float16(kind):
        return "float"
    if pa.types.is_float64(kind):
        return "double"
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        return "string"
    if pa.types.is_binary(kind) or pa.types.is_large_binary(kind):
        return "bytes"
    if pa.types.is_date32(kind):
        return {"type": "int", "logicalType": "date"}
    if pa.types.is_timestamp(kind):
        if kind.tz is None:
            raise InvalidArgumentError(NAIVE_TIMESTAMPS, field=name)
        unit = "millis" if kind.unit in ("s", "ms") else "micros"
        return {"type": "long", "logicalType": f"timestamp-{unit}"}
    if pa.types.is_decimal(kind):
        return {
            "type": "fixed",
            "name": "fixed",
            "namespace": f"{namespace}.{name}",
            "size": _decimal_size(kind.precision),
            "logicalType": "decimal",
            "precision": kind.precision,
            "scale": kind.scale,
        }
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        return {"type": "array", "items": ["null", _avro_type(kind.value_type, name, namespace)]}
    if pa.types.is_map(kind):
        if not pa.types.is_string(kind.key_type):
            raise InvalidArgumentError("map keys must be strings in Avro", field=name)
        return {"type": "map", "values": ["null", _avro_type(kind.item_type, name, namespace)]}
    if pa.types.is_struct(kind):
        return _record(name, namespace, [kind.field(i) for i in range(kind.num_fields)])
    raise InvalidArgumentError(f"type {kind} has no Hudi/Avro equivalent", field=name)


def _decimal_size(precision: int) -> int:
    """Smallest byte count holding ``precision`` digits, as Spark/Hudi size fixed decimals."""
    size = 1
    while 2 ** (8 * size - 1) < 10**precision:
        size += 1
    return size


def _arrow_field(field: dict[str, Any]) -> pa.Field:
    return pa.field(field["name"], _arrow_type(_non_null(field["type"]), field["name"]))


def _arrow_type(avro: Any, name: str) -> pa.DataType:
    if isinstance(avro, str):
        if avro not in _PRIMITIVES:
            raise InvalidArgumentError(f"unsupported Avro type {avro!r}", field=name)
        return _PRIMITIVES[avro]
    if isinstance(avro, list):
        return _arrow_type(_non_null(avro), name)
    logical = avro.get("logicalType")
    if logical == "date":
        return pa.date32()
    if logical in ("timestamp-micros", "local-timestamp-micros"):
        return pa.timestamp("us", tz="UTC" if logical == "timestamp-micros" else None)
    if logical in ("timestamp-millis", "local-timestamp-millis"):
        return pa.timestamp("ms", tz="UTC" if logical == "timestamp-millis" else None)
    if logical == "decimal":
        return pa.decimal128(avro["precision"], avro.get("scale", 0))
    kind = avro["type"]
    if kind == "array":
        return pa.list_(_arrow_type(avro["items"], name))
    if kind == "map":
        return pa.map_(pa.string(), _arrow_type(avro["values"], name))
    if kind == "record":
        return pa.struct([_arrow_field(child) for child in avro["fields"]])
    return _arrow_type(kind, name)


def _parse(avro_json: str) -> dict[str, Any]:
    try:
        record = json.loads(avro_json)
    except ValueError as error:
        raise InvalidArgumentError(f"not an Avro schema: {error}", field="schema") from error
    if not isinstance(record, dict) or record.get("type") != "record":
        raise InvalidArgumentError("not an Avro record schema", field="schema")
    return record


def _non_null(avro: Any) -> Any:
    if isinstance(avro, list):
        branches = [branch for branch in avro if branch != "null"]
        return branches[0] if len(branches) == 1 else branches
    return avro


def _shape(avro: Any) -> Any:
    """The type with record names, namespaces and defaults removed, for comparison."""
    if isinstance(avro, list):
        return [_shape(branch) for branch in avro]
    if not isinstance(avro, dict):
        return avro
    shaped = {
        key: _shape(value)
        for key, value in avro.items()
        if key not in ("name", "namespace", "default", "doc", "fields")
    }
    if "fields" in avro:
        shaped["fields"] = [[field["name"], _shape(field["type"])] for field in avro["fields"]]
    return shaped


def _describe(avro: Any) -> str:
    """A type as people write it: ``decimal(12,2)``, ``array<int>``, ``timestamp-micros``."""
    if isinstance(avro, list):
        return " | ".join(_describe(branch) for branch in avro if branch != "null")
    if not isinstance(avro, dict):
        return str(avro)
    if _is_decimal(avro):
        return f"decimal({avro['precision']},{avro.get('scale', 0)})"
    if avro.get("logicalType"):
        return str(avro["logicalType"])
    if avro.get("type") == "array":
        return f"array<{_describe(_non_null(avro['items']))}>"
    if avro.get("type") == "map":
        return f"map<string,{_describe(_non_null(avro['values']))}>"
    if avro.get("type") == "record":
        return "struct<" + ",".join(f["name"] for f in avro["fields"]) + ">"
    return _describe(avro.get("type"))


def conform(rows: pa.Table, schema: pa.Schema) -> pa.Table:
    """``rows`` in ``schema``'s column order and types (a base file's, a snapshot's); columns
    ``rows`` lacks (added since) are null."""
    columns = [
        rows.column(field.name).cast(field.type)
        if field.name in rows.column_names
        else pa.nulls(rows.num_rows, field.type)
        for field in schema
    ]
    return pa.Table.from_arrays(columns, schema=schema)
