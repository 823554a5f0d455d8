"""The per-process cache of parsed timeline files: a file listed with another size is
parsed again, files no longer listed are forgotten, the least recently used go first."""

from __future__ import annotations

from tidemark.table.timeline.parsed_files import ParsedFiles


def test_a_file_listed_with_another_size_is_parsed_again() -> None:
    cache: ParsedFiles[str] = ParsedFiles(8)
    parses: list[int] = []

    def parse(size: int) -> str:
        parses.append(size)
        return f"content of {size} bytes"

    assert cache.read(("t", "a.log", 10), lambda: parse(10)) == "content of 10 bytes"
    assert cache.read(("t", "a.log", 10), lambda: parse(10)) == "content of 10 bytes"
    assert cache.read(("t", "a.log", 25), lambda: parse(25)) == "content of 25 bytes"
    assert parses == [10, 25]


def test_retain_forgets_the_tables_files_no_longer_listed_and_only_its() -> None:
    cache: ParsedFiles[str] = ParsedFiles(8)
    for key in [("t", "a", 1), ("t", "b", 1), ("u", "a", 1)]:
        cache.put(key, "parsed")
    cache.retain("t", ["b"])
    assert cache.keys("t") == [("t", "b", 1)]
    assert cache.keys("u") == [("u", "a", 1)]


def test_the_least_recently_used_file_goes_beyond_the_bound() -> None:
    cache: ParsedFiles[str] = ParsedFiles(2)
    cache.put(("t", "a", 1), "a")
    cache.put(("t", "b", 1), "b")
    assert cache.get(("t", "a", 1)) == "a"
    cache.put(("t", "c", 1), "c")
    assert cache.keys("t") == [("t", "a", 1), ("t", "c", 1)]
