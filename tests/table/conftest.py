"""Fixtures for the table library tests (helpers live in table_testkit)."""

from __future__ import annotations

from pathlib import Path

import pytest

from table.log_testkit import extract_mor_fixtures
from table.table_testkit import Writer, people_config
from tidemark.table import HoodieTable


@pytest.fixture
def table_uri(local_root: str) -> str:
    return f"{local_root}/people"


@pytest.fixture(params=["local", pytest.param("s3", marks=pytest.mark.s3)])
def any_table_uri(request: pytest.FixtureRequest, local_root: str) -> str:
    """A fresh table location on the local filesystem and on the moto S3 server."""
    if request.param == "s3":
        bucket: str = request.getfixturevalue("s3_bucket")
        return bucket
    return f"{local_root}/people"


@pytest.fixture
def people(table_uri: str) -> Writer:
    return Writer(HoodieTable.create(table_uri, people_config()))


@pytest.fixture(scope="session")
def mor_tables(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The merge-on-read tables Hudi wrote, extracted once; tests copy before changing one."""
    return extract_mor_fixtures(tmp_path_factory.mktemp("hudi-mor"))
