"""A ``storage`` fixture running each test on both backends."""

from __future__ import annotations

import pytest

from tidemark.storage import Storage, open_storage


@pytest.fixture(params=["local", pytest.param("s3", marks=pytest.mark.s3)])
def storage_uri(request: pytest.FixtureRequest) -> str:
    """Root URI of an empty local directory or an empty prefix in a fresh S3 bucket."""
    fixture = "local_root" if request.param == "local" else "s3_bucket"
    return str(request.getfixturevalue(fixture))


@pytest.fixture
def storage(storage_uri: str) -> Storage:
    return open_storage(storage_uri)
