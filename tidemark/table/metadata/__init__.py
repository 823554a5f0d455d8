"""What each timeline action records, in Hudi's encodings: commit and replace-commit
metadata (JSON on table version 6, Avro on 8 and 9), clean plans and results, rollback plans and
results, compaction plans, and the Avro container helpers they share. The bottom of the table
library: pure encodings, no storage; every other package of ``tidemark.table`` may import it."""

__all__ = [
    "actions",
    "avro",
    "clean",
    "commit",
    "commit_avro",
    "compaction",
    "rollback",
]
