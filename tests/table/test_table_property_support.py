"""Every hoodie.properties key of Hudi 0.14 is accounted for: refused values stop
``tidemark read``/``show`` with one line naming the key and value and change nothing; the
docs table lists exactly the keys the code knows."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from table.table_testkit import copy_fixture, file_tree, set_property
from table.v1x_testkit import ZIPS, unzip_fixture
from tidemark.cli import main
from tidemark.errors import FailedPreconditionError
from tidemark.table.properties.config import parse_properties
from tidemark.table.properties.support import RULES, check_properties, rule_for

DOCS = Path(__file__).resolve().parents[2] / "docs" / "hudi-properties.md"
FIXTURE = "v6_simplekeygen_nonhivestyle"

TABLE_REFUSALS = [
    ("hoodie.table.version", "5"),
    ("hoodie.timeline.layout.version", "0"),
    ("hoodie.table.base.file.format", "ORC"),
    ("hoodie.table.ro.file.format", "HFILE"),
    ("hoodie.bootstrap.base.path", "s3://bucket/source"),
    ("hoodie.datasource.write.drop.partition.columns", "true"),
]


@pytest.mark.parametrize(("key", "value"), TABLE_REFUSALS)
def test_refused_value_stops_reads_in_one_line(
    key: str, value: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = Path(copy_fixture(FIXTURE, tmp_path))
    set_property(root, key, value)
    before = file_tree(root)
    for command in (["read", "--table", str(root)], ["show", "--table", str(root)]):
        assert main(command) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1
        assert err[0].startswith(f"tidemark {command[0]}: error: {key}: value {value!r}")
    assert file_tree(root) == before


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("hoodie.table.type", "copy_on_write"),
        ("hoodie.table.base.file.format", "parquet"),
        ("hoodie.bootstrap.base.path", ""),
        ("hoodie.datasource.write.drop.partition.columns", "false"),
        ("hoodie.table.cdc.enabled", "true"),
        ("hoodie.table.type", "MERGE_ON_READ"),
        ("hoodie.table.timeline.timezone", "UTC"),
    ],
)
def test_accepted_values_read(
    key: str, value: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Write-only refusals (CDC, merge-on-read) and ignored keys leave reads working."""
    root = Path(copy_fixture(FIXTURE, tmp_path))
    set_property(root, key, value)
    assert main(["read", "--table", str(root), "--where", "id=2"]) == 0
    assert "1 rows" in capsys.readouterr().out


@pytest.mark.parametrize(("key", "value"), [("hoodie.table.cdc.enabled", "true")])
def test_write_scope_rules_refuse_only_writes(key: str, value: str) -> None:
    props = {key: value}
    check_properties(props, "table")
    with pytest.raises(FailedPreconditionError) as refused:
        check_properties(props, "write")
    assert str(refused.value).startswith(f"{key}: value {value!r}")


def test_fixture_keys_are_all_accounted_for(tmp_path: Path) -> None:
    fixtures = Path(__file__).resolve().parents[1] / "fixtures" / "hudi-v6"
    for name in ZIPS:
        unzip_fixture(name, tmp_path)
    for folder in (fixtures, tmp_path):
        for properties in folder.glob("*/.hoodie/hoodie.properties"):
            for key in parse_properties(properties.read_text()):
                assert rule_for(key) is not None, (properties, key)


def test_docs_table_lists_every_rule() -> None:
    documented = dict(re.findall(r"^\| `([^`]+)` \| (\w+) \|", DOCS.read_text(), re.MULTILINE))
    assert documented == {rule.key: rule.treatment for rule in RULES}
