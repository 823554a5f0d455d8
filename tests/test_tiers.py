"""The collection hook in tests/conftest.py marks each test with its tiers (``spark``,
``s3``, ``slow``) by folder and by the fixtures it needs, so ``make test-fast`` leaves out
whatever starts Spark, the S3 server or takes long, also in folders added later."""

from __future__ import annotations

from pathlib import Path

import pytest

CONFTEST = Path(__file__).with_name("conftest.py")
TIERS = ("spark", "s3", "slow")


def _tiers_by_test(pytester: pytest.Pytester) -> dict[str, set[str]]:
    """Collect ``pytester``'s tests under a copy of the suite's conftest."""
    pytester.makeconftest(CONFTEST.read_text())
    items = pytester.inline_genitems()[0]
    return {item.nodeid: {m.name for m in item.iter_markers() if m.name in TIERS} for item in items}


def test_tests_get_their_tiers_by_folder_and_by_the_fixtures_they_need(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(  # no __init__.py: module names apart from the suite's own
        **{
            "spark/test_job.py": "def test_job():\n    pass\n",
            "jobs/test_plan.py": (
                "import pytest\n\n"
                "@pytest.fixture\n"
                "def session(spark):\n    return spark\n\n"
                "def test_through_a_fixture(session):\n    pass\n\n"
                "def test_pure():\n    pass\n"
            ),
            "storage/test_bucket.py": (
                "import pytest\n\n"
                "def test_bucket(s3_bucket):\n    pass\n\n"
                "def test_proxy(faulty_s3):\n    pass\n\n"
                '@pytest.fixture(params=["local", pytest.param("s3", marks=pytest.mark.s3)])\n'
                "def uri(request, local_root):\n"
                '    return request.getfixturevalue("s3_bucket") if request.param == "s3" '
                "else local_root\n\n"
                "def test_either(uri):\n    pass\n"
            ),
            "hardening/test_fuzz_index.py": "def test_fuzz():\n    pass\n",
        }
    )
    assert _tiers_by_test(pytester) == {
        "spark/test_job.py::test_job": {"spark"},
        "jobs/test_plan.py::test_through_a_fixture": {"spark", "s3"},
        "jobs/test_plan.py::test_pure": set(),
        "storage/test_bucket.py::test_bucket": {"s3"},
        "storage/test_bucket.py::test_proxy": {"s3"},
        "storage/test_bucket.py::test_either[local]": set(),
        "storage/test_bucket.py::test_either[s3]": {"s3"},
        "hardening/test_fuzz_index.py::test_fuzz": {"slow"},
    }


def test_a_slow_name_that_matches_no_test_fails_the_collection(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(**{"index/test_index_scale_bench.py": "def test_renamed():\n    pass\n"})
    pytester.makepyfile(**{"hardening/test_service_faults.py": "def test_renamed():\n    pass\n"})
    pytester.makeconftest(CONFTEST.read_text())
    result = pytester.runpytest("--collect-only", "-q")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    stale = "hardening/test_service_faults.py::test_index_service_killed_during_its_compaction"
    assert f"SLOW in tests/conftest.py names no test: ['{stale}']" in result.stderr.str()


def test_a_run_time_s3_bucket_without_the_s3_mark_fails_naming_the_fix(
    pytester: pytest.Pytester,
) -> None:
    """A fixture choosing S3 at run time, unmarked: its test would run in the fast tier."""
    pytester.makeconftest(CONFTEST.read_text())
    pytester.makepyfile(
        test_hidden=(
            "import pytest\n\n"
            '@pytest.fixture(scope="session")\n'
            "def s3_server():\n"
            '    return "no server: the mark is checked first"\n\n'
            '@pytest.fixture(params=["local", "s3"])\n'
            "def uri(request, local_root):\n"
            '    return request.getfixturevalue("s3_bucket") if request.param == "s3" '
            "else local_root\n\n"
            "def test_either(uri):\n    pass\n"
        )
    )
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(["*test_either?s3? asks for s3_bucket at run time: mark it s3*"])


def test_the_longest_files_are_collected_first_and_exist(pytester: pytest.Pytester) -> None:
    from conftest import LONGEST_FIRST

    assert all((CONFTEST.parent / name).is_file() for name in LONGEST_FIRST)
    two_tests = "def test_b():\n    pass\n\ndef test_c():\n    pass\n"
    pytester.makepyfile(
        **{
            "a/test_first.py": "def test_a():\n    pass\n",
            # a suite file's name, in a folder of no package: no module of the suite's
            "spark/test_stream_mor_compaction.py": two_tests,
        }
    )
    pytester.makeconftest(CONFTEST.read_text())
    collected = pytester.runpytest("--collect-only", "-q").outlines
    assert collected[:3] == [
        "spark/test_stream_mor_compaction.py::test_b",
        "spark/test_stream_mor_compaction.py::test_c",
        "a/test_first.py::test_a",
    ]
