"""Model-based test of RecordIndex: random writes, completions, failed writes (rolled back,
discarded now or later), compactions and restarts against a dict; lookups always agree."""

from __future__ import annotations

import shutil
import tempfile

import pyarrow as pa
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from tidemark.index.build import build_index
from tidemark.index.record_index import RecordIndex
from tidemark.storage import LocalStorage

from .indexkit import Commits

KEYS = [
    "a", "ab", "Aa", "BB", "AaAa", "BBBB",  # prefixes and Java hash collisions
    "é", "😀", "ключ", "polygenelubricants", "k" * 300,
    "0b9f1c7e-3d2a-4c5b-8e6f-7a8b9c0d1e2f", "0b9f1c7e-3d2a-4c5b-8e6f-7a8b9c0d1e30",
]  # fmt: skip
LOCATIONS = [("p1", "f1-0"), ("p1", "f2-0"), ("p=2", "f3-0")]
CHANGES = st.dictionaries(
    st.sampled_from(KEYS), st.one_of(st.none(), st.sampled_from(LOCATIONS)), max_size=5
)
Location = tuple[str, str, str]


def as_table(changes: dict[str, tuple[str, str] | None]) -> pa.Table:
    rows = list(changes.items())
    return pa.table(
        {
            "key": pa.array([key for key, _ in rows], pa.string()),
            "partition": pa.array([loc[0] if loc else None for _, loc in rows], pa.string()),
            "file_id": pa.array([loc[1] if loc else None for _, loc in rows], pa.string()),
        }
    )


class IndexModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.root = tempfile.mkdtemp(prefix="tidemark-index-model-")
        self.storage = LocalStorage(self.root)
        self.commits = Commits(self.storage)
        first = self.commits.start()
        self.commits.complete(first)
        self.latest = first
        self.model: dict[str, Location] = dict.fromkeys(KEYS[::2], ("p0", "f0-0", first))
        build_index(
            self.storage,
            pa.array(list(self.model), pa.string()),
            *(pa.array([loc[i] for loc in self.model.values()]) for i in range(3)),
            as_of=first,
            num_shards=3,
        )
        self.index = RecordIndex.open(self.storage)
        self.pending: str | None = None
        self.staged: list[dict[str, tuple[str, str] | None]] = []

    def teardown(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)

    @precondition(lambda self: self.pending is None)
    @rule(changes=CHANGES)
    def start_write(self, changes: dict[str, tuple[str, str] | None]) -> None:
        self.pending = self.commits.start()
        self.staged = []
        self.stage_more(changes)

    @precondition(lambda self: self.pending is not None)
    @rule(changes=CHANGES)
    def stage_more(self, changes: dict[str, tuple[str, str] | None]) -> None:
        """Another stage call of the same write (keys not staged by it yet)."""
        assert self.pending is not None
        already = {key for staged in self.staged for key in staged}
        fresh = {key: loc for key, loc in changes.items() if key not in already}
        self.index.stage(self.pending, as_table(fresh))
        self.staged.append(fresh)

    @precondition(lambda self: self.pending is not None and self.staged)
    @rule()
    def retry_last_stage(self) -> None:
        assert self.pending is not None
        self.index.stage(self.pending, as_table(self.staged[-1]))

    @precondition(lambda self: self.pending is not None)
    @rule()
    def complete(self) -> None:
        assert self.pending is not None
        self.commits.complete(self.pending)
        for staged in self.staged:
            for key, location in staged.items():
                if location is None:
                    self.model.pop(key, None)
                else:
                    self.model[key] = (*location, self.pending)
        self.latest, self.pending = self.pending, None

    @precondition(lambda self: self.pending is not None)
    @rule(discard_now=st.booleans())
    def fail(self, discard_now: bool) -> None:
        """The write dies; the next writer rolls its instant back (and discards)."""
        assert self.pending is not None
        self.commits.roll_back(self.pending)
        if discard_now:
            self.index.discard(self.pending)
        self.pending = None

    @rule()
    def discard_rolled_back(self) -> None:
        self.index.discard_rolled_back()

    @rule(min_deltas=st.integers(min_value=1, max_value=3))
    def compact(self, min_deltas: int) -> None:
        self.index.compact(min_deltas=min_deltas)

    @rule()
    def restart(self) -> None:
        self.index = RecordIndex.open(self.storage)

    @invariant()
    def lookups_agree(self) -> None:
        answer = self.index.lookup(pa.array(KEYS, pa.string()), as_of=self.latest)
        rows = zip(
            *(answer[c].to_pylist() for c in ("partition", "file_id", "instant")), strict=True
        )
        found = {key: row for key, row in zip(KEYS, rows, strict=True) if row[0] is not None}
        assert found == self.model
        assert self.index.stats().entries == len(self.model)  # what the lookup just saw


IndexModel.TestCase.settings = settings(max_examples=25, stateful_step_count=15, deadline=None)
test_record_index_agrees_with_a_dict = IndexModel.TestCase
