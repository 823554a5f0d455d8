"""Command blocks: on table version 6, Hudi rolls back a failed deltacommit's appends by
appending a rollback command block (no content) as the next log version; readers then drop
every block whose INSTANT_TIME is its TARGET_INSTANT_TIME. Versions 8 and 9 delete the
failed log files instead and write no command block."""

from __future__ import annotations

from tidemark.table.logfiles.framing import BlockType, HeaderKey, LogBlock

__all__ = ["ROLLBACK", "rollback_block", "rolled_back_instant"]

ROLLBACK = "0"
"""The COMMAND_BLOCK_TYPE of a rollback, Hudi's only command."""


def rollback_block(instant: str, target_instant: str) -> LogBlock:
    """The block the rollback at ``instant`` appends to undo ``target_instant``'s blocks."""
    header = {  # in the order of the block Hudi wrote in v6_nonpartitioned_rollback
        HeaderKey.INSTANT_TIME: instant,
        HeaderKey.COMMAND_BLOCK_TYPE: ROLLBACK,
        HeaderKey.TARGET_INSTANT_TIME: target_instant,
    }
    return LogBlock(BlockType.COMMAND, header)


def rolled_back_instant(block: LogBlock) -> str:
    """The instant a rollback command block undoes."""
    block.check_type(BlockType.COMMAND)
    command = block.header.get(HeaderKey.COMMAND_BLOCK_TYPE)
    target = block.header.get(HeaderKey.TARGET_INSTANT_TIME)
    if command != ROLLBACK or target is None:
        raise block.damaged(f"command {command!r} targeting {target!r} is not a rollback")
    return target
