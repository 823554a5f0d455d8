"""Every HFile Hudi wrote in the fixtures' metadata tables (Hudi 1.0 through HBase, Hudi
1.1's own writer; base files and HFILE_DATA log blocks) reads, and its cells written back
with its file info and options are its own bytes."""

from __future__ import annotations

import collections

import pytest

from hfile.hfile_testkit import extract, hudi_hfiles
from tidemark.errors import DataLossError, InvalidArgumentError
from tidemark.hfile.blocks import Codec
from tidemark.hfile.reader import Cell, HFileReader
from tidemark.hfile.style import Style, WriteOptions
from tidemark.hfile.trailer import COMPARATOR
from tidemark.hfile.writer import write_hfile


@pytest.fixture(scope="module")
def hfiles(tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    return dict(hudi_hfiles(extract(tmp_path_factory.mktemp("hfiles"))))


def rewrite(reader: HFileReader, options: WriteOptions | None = None) -> bytes:
    return write_hfile(
        reader.cells(),
        file_info=reader.user_file_info,
        meta_blocks=reader.meta_blocks,
        options=options or reader.options,
        create_time_ms=reader.create_time_ms,
    )


def test_every_hudi_hfile_is_rewritten_to_its_own_bytes(hfiles: dict[str, bytes]) -> None:
    kinds: collections.Counter[tuple[Style, bool, bool]] = collections.Counter()
    for where, data in hfiles.items():
        reader = HFileReader(data)
        assert reader.trailer.message.comparator_class_name == COMPARATOR, where
        assert rewrite(reader) == data, where
        kinds[reader.style, "@" in where, reader.trailer.message.entry_count > 0] += 1
    # both writers, base files and log blocks, empty files and files with cells
    assert set(kinds) == {
        (style, log, cells) for style in Style for log in (False, True) for cells in (False, True)
    } - {(Style.HBASE, True, False), (Style.HUDI, True, False)}
    assert sum(kinds.values()) > 500


def test_lookups_and_scans_agree_with_the_cells(hfiles: dict[str, bytes]) -> None:
    biggest = max(hfiles.values(), key=lambda data: HFileReader(data).trailer.message.entry_count)
    reader = HFileReader(biggest)
    cells = list(reader.cells())
    assert len(cells) > 10
    assert [cell.row for cell in cells] == sorted(cell.row for cell in cells)
    for cell in cells:
        assert reader.get(cell.row) == cell.value
    assert reader.get(cells[0].row[:-1]) is None
    assert reader.get(cells[-1].row + b"\x00") is None
    start, stop = cells[3].row, cells[-3].row
    assert list(reader.scan(start, stop)) == cells[3:-3]
    assert list(reader.scan(cells[-1].row + b"\x00")) == []
    prefix = cells[5].row[:4]
    assert list(reader.scan_prefix(prefix)) == [c for c in cells if c.row.startswith(prefix)]


@pytest.mark.parametrize("style", list(Style))
@pytest.mark.parametrize("codec", list(Codec))
def test_many_blocks_read_back(style: Style, codec: Codec) -> None:
    cells = [Cell(f"key-{n:05}".encode(), b"v" * (n % 50)) for n in range(3000)]
    options = WriteOptions(style, codec, block_size=4096)
    data = write_hfile(cells, file_info={b"schema": b"{}"}, options=options, create_time_ms=7)
    reader = HFileReader(data)
    assert len(reader.data_index) > 10
    assert reader.options == WriteOptions(style, codec)
    assert list(reader.cells()) == cells
    assert reader.user_file_info == {b"schema": b"{}"}
    assert reader.create_time_ms == 7
    for cell in cells[::97]:
        assert reader.get(cell.row) == cell.value
    assert [c.row for c in reader.scan_prefix(b"key-012")] == [
        f"key-{n:05}".encode() for n in range(1200, 1300)
    ]
    assert (
        write_hfile(reader.cells(), file_info={b"schema": b"{}"}, options=options, create_time_ms=7)
        == data
    )


def test_a_flipped_byte_in_a_checksummed_block_is_data_loss() -> None:
    cells = [(b"a", b"1"), (b"b", b"2")]
    data = bytearray(write_hfile(cells, file_info={}, options=WriteOptions(Style.HBASE)))
    data[40] ^= 1
    with pytest.raises(DataLossError, match="CRC32C"):
        list(HFileReader(bytes(data)).cells())


def test_no_trailer_is_data_loss() -> None:
    data = write_hfile([(b"a", b"1")], file_info={})
    with pytest.raises(DataLossError, match="no trailer"):
        HFileReader(data[:-1])


def test_a_cell_with_an_mvcc_timestamp_is_refused() -> None:
    options = WriteOptions(Style.HUDI, Codec.NONE)
    data = bytearray(write_hfile([(b"a", b"1")], file_info={}, options=options))
    end_of_cell = 33 + 8 + len(b"\x00\x01a") + 10 + 1  # header, lengths, key, value
    assert data[end_of_cell] == 0
    data[end_of_cell] = 1
    with pytest.raises(InvalidArgumentError, match="MVCC 1"):
        list(HFileReader(bytes(data)).cells())


def test_unsorted_rows_and_computed_file_info_are_refused() -> None:
    with pytest.raises(InvalidArgumentError, match="sorted"):
        write_hfile([(b"b", b""), (b"a", b"")], file_info={})
    with pytest.raises(InvalidArgumentError, match=r"hfile\.LASTKEY") as error:
        write_hfile([], file_info={b"hfile.LASTKEY": b"x"})
    assert error.value.field == "file_info"


@pytest.mark.parametrize("style", list(Style))
def test_a_rows_cells_share_a_block(style: Style) -> None:
    cells = [(b"a", b"x" * 100)] * 5 + [(b"b", b"y")]
    options = WriteOptions(style, block_size=64)
    reader = HFileReader(write_hfile(cells, file_info={}, options=options))
    assert [entry.key for entry in reader.data_index] == [b"a", b"b"]
    assert list(reader.cells()) == cells
