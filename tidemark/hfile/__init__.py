"""HFile v3 as Apache Hudi writes it, the base file format of Hudi's metadata table (its
``files``, ``column_stats``, ``record_index``... partitions) and the content of the
metadata table's ``HFILE_DATA`` log blocks; hudi-io's ``hfile_format.md`` describes it.

- ``keys``: cell keys (an HBase ``KeyValue`` key around Hudi's row) and Hadoop VInts;
- ``blocks``: the block header, NONE and GZ, CRC32C (or NULL) checksums per 16 KiB;
- ``trailer``: the 4096-byte trailer and the ``FILEINF2`` file info, protobuf messages
  (``protos/tidemark/hfile/v1/hfile.proto``);
- ``reader``: ``HFileReader`` (point lookups through the root index, range and prefix
  scans, every cell, meta blocks, file info) and the two writers' ``Style``;
- ``writer``: ``write_hfile``, which lays a file out as Hudi 1.0 (through HBase 2.4) or
  Hudi 1.1 (its own writer) does: every Hudi-written HFile of ``tests/fixtures`` decodes
  and re-encodes to its own bytes.

Pure encodings of bytes, no storage: beside ``tidemark.table`` and below it, so the table
library and the record index can import it; it imports only ``tidemark.errors`` and the
generated ``tidemark.proto``.

The index service's shard files (``tidemark/index/shard_file.py``) cannot share these
blocks. A shard file block is zstd-compressed with its CRC-32 kept in the block index,
stores UUID keys as 16-byte planes or other keys prefix-compressed, and locations as 1-, 2-
or 4-byte codes into an Arrow dictionary; an HFile block has a 33-byte header with its own
CRC32C per 16 KiB chunk, only NONE or GZ (all that Hudi's and hudi-rs's readers take), and
every cell spends 21 bytes of lengths, HBase key fields and MVCC around a key stored whole.
Writing shard blocks as HFile blocks would change the index's documented format
(docs/record-index.md) and make its files larger and its lookups slower, and no Hudi
reader would read them anyway: a shard file is not a Hudi file. What they share is the
shape (sorted blocks, a root index of first keys, file info, a fixed trailer), not bytes.
"""

__all__ = ["blocks", "keys", "reader", "style", "trailer", "writer"]
