"""Local filesystem backend: a directory is the root, files are the objects.

Writes go to a temporary file in the target directory and are published with a rename
(or a hard link for create-if-absent, which fails when the target exists), so readers
never see partial content. Requests are counted under the same operation names as S3 so
benchmarks compare like with like.

Every path is contained: resolved with its symlinks, it must stay under the root (itself
resolved), so a ``.hoodie`` or partition folder linked elsewhere cannot make a service or
job read or write outside the table (PERMISSION_DENIED naming the path). Folders found
inside are remembered, so the hot paths pay one ``lstat`` per call (is the file itself a
link?).
"""

from __future__ import annotations

import contextlib
import io
import os
import stat
import uuid
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, BinaryIO

from tidemark.errors import NotFoundError, PermissionDeniedError
from tidemark.storage.base import (
    DELETE_BATCH_SIZE,
    FileInfo,
    ListDirResult,
    PartialFile,
    PublishOnClose,
    RequestCounter,
    Storage,
)
from tidemark.storage.uri import (
    LocalUri,
    parse_uri,
    validate_directory,
    validate_path,
    validate_prefix,
)

TEMP_MARKER = ".tidemark-tmp-"
"""Infix of in-flight temporary files; listings skip them."""

_MISSING = (FileNotFoundError, IsADirectoryError, NotADirectoryError)
PATH_MAX = 4096
"""Linux's limit on a path, its terminating NUL included."""
_TEMP_EXTRA_BYTES = len(f".{TEMP_MARKER}{uuid.UUID(int=0).hex}")
"""What a temporary's name adds to its target's (``_temp_for``)."""
MAX_KNOWN_FOLDERS = 10_000
"""Folders remembered as inside the root; the set starts over beyond it."""
FOLDER_RACE_ATTEMPTS = 5
"""Tries at making a temporary's folder and the temporary in it (``_temp_for``)."""


class LocalStorage(Storage):
    """Objects under a local directory; ``uri`` is a path or ``file://`` URI."""

    def __init__(self, uri: str) -> None:
        parsed = parse_uri(uri)
        if not isinstance(parsed, LocalUri):
            raise TypeError(f"not a local URI: {uri}")
        self.uri = uri
        self.root = Path(parsed.root)
        self.requests = RequestCounter()
        self._real_root = os.path.realpath(self.root)
        self._inside: set[Path] = set()

    def __reduce__(self) -> tuple[Any, ...]:
        return (LocalStorage, (self.uri,))

    @property
    def max_path_bytes(self) -> int:
        root = len(os.fsencode(self.root.absolute())) + len("/")
        return PATH_MAX - len("\0") - root - _TEMP_EXTRA_BYTES

    def _full(self, path: str) -> Path:
        full = self.root / validate_path(path)
        self._check_folder(full.parent, path)
        if full.is_symlink():
            self._check_inside(full, path)
        return full

    def local_file(self, path: str) -> Path:
        """The file holding object ``path`` (checked inside the root, as every request),
        for a reader that opens it itself: pyarrow reads a file it opened without holding
        Python's lock, where reading a Python stream takes it for every read."""
        self.requests.add("get")
        return self._full(path)

    def _folder(self, directory: str) -> Path:
        full = self.root / directory
        self._check_folder(full, directory)
        return full

    def _check_folder(self, folder: Path, path: str) -> None:
        if folder in self._inside:
            return
        self._check_inside(folder, path)
        if len(self._inside) >= MAX_KNOWN_FOLDERS:
            self._inside.clear()
        self._inside.add(folder)

    def _check_inside(self, full: Path, path: str) -> None:
        real = os.path.realpath(full)
        if real != self._real_root and not real.startswith(self._real_root.rstrip("/") + "/"):
            raise PermissionDeniedError(
                f"{path!r} resolves to {real}, outside {self._real_root} (a symbolic link "
                "inside the table points out of it)",
                field="path",
            )

    def _not_found(self, path: str) -> NotFoundError:
        return NotFoundError(f"no object {path!r} in {self.uri}", field="path")

    @staticmethod
    def _temp_for(full: Path) -> Path:
        """A new empty temporary beside ``full``, its folder made first. A delete in the
        same folder prunes it once empty (``_prune_empty_parents``), between the two steps
        or inside ``mkdir``'s own exists check (FileNotFoundError, FileExistsError): lock
        waiters' tickets come and go so in one folder, and a planner whose trigger and a
        client wanted one table's lock at once failed a call with INTERNAL. Once the
        temporary exists the folder is not empty, so it stays."""
        temp = full.with_name(f".{full.name}{TEMP_MARKER}{uuid.uuid4().hex}")
        attempt = 1
        while True:
            try:
                full.parent.mkdir(parents=True, exist_ok=True)
                temp.touch(exist_ok=False)
                return temp
            except (FileNotFoundError, FileExistsError):
                if attempt == FOLDER_RACE_ATTEMPTS:
                    raise
                attempt += 1

    def _write_temp(self, full: Path, data: bytes) -> Path:
        temp = self._temp_for(full)
        with temp.open("wb") as out:
            out.write(data)
        return temp

    def read(self, path: str) -> bytes:
        full = self._full(path)
        self.requests.add("get")
        try:
            return full.read_bytes()
        except _MISSING as missing:
            raise self._not_found(path) from missing

    def write(self, path: str, data: bytes) -> None:
        full = self._full(path)
        self.requests.add("put")
        temp = self._write_temp(full, data)
        try:
            temp.replace(full)
        except BaseException:
            temp.unlink()
            raise

    def create_if_absent(self, path: str, data: bytes) -> bool:
        full = self._full(path)
        self.requests.add("conditional_put")
        temp = self._write_temp(full, data)
        try:
            full.hardlink_to(temp)
        except FileExistsError:
            return False
        finally:
            temp.unlink(missing_ok=True)
        return True

    def list(self, prefix: str) -> Iterator[FileInfo]:
        validate_prefix(prefix)
        self.requests.add("list")
        found = []
        for directory, _, names in os.walk(self._folder(prefix.rpartition("/")[0])):
            for name in names:
                full = Path(directory) / name
                relative = full.relative_to(self.root).as_posix()
                info = _file_stat(full)
                if TEMP_MARKER not in name and relative.startswith(prefix) and info is not None:
                    found.append(FileInfo(relative, info.st_size, info.st_mtime))
        return iter(sorted(found, key=lambda info: info.path))

    def list_dir(self, directory: str) -> ListDirResult:
        directory = validate_directory(directory)
        self.requests.add("list")
        files: list[FileInfo] = []
        dirs: list[str] = []
        try:
            with os.scandir(self._folder(directory)) as entries:
                for entry in entries:
                    path = f"{directory}/{entry.name}" if directory else entry.name
                    if entry.is_dir():
                        dirs.append(path)
                        continue
                    info = _file_stat(Path(entry.path))
                    if info is not None and TEMP_MARKER not in entry.name:
                        files.append(FileInfo(path, info.st_size, info.st_mtime))
        except (FileNotFoundError, NotADirectoryError):
            return ListDirResult((), ())
        return ListDirResult.from_unsorted(files, dirs)

    def partial_files(self, directory: str) -> tuple[PartialFile, ...]:
        """``.<name>.tidemark-tmp-<id>`` files of writers killed before their rename."""
        directory = validate_directory(directory)
        self.requests.add("list")
        try:
            names = sorted(entry.name for entry in self._folder(directory).iterdir())
        except (FileNotFoundError, NotADirectoryError):
            return ()
        prefix = f"{directory}/" if directory else ""
        found = []
        for name in names:
            hidden_target, infix, _ = name.partition(TEMP_MARKER)
            if infix and hidden_target.startswith(".") and len(hidden_target) > 1:
                try:  # published or deleted since the listing: not partial any more
                    modified_at = (self.root / directory / name).stat().st_mtime
                except FileNotFoundError:
                    continue
                found.append(PartialFile(prefix + name, prefix + hidden_target[1:], modified_at))
        return tuple(found)

    def delete_many(self, paths: Iterable[str]) -> int:
        fulls = [self._full(path) for path in paths]
        for start in range(0, len(fulls), DELETE_BATCH_SIZE):
            self.requests.add("delete")
            for full in fulls[start : start + DELETE_BATCH_SIZE]:
                with contextlib.suppress(FileNotFoundError):
                    full.unlink()
        self._prune_empty_parents({full.parent for full in fulls})
        return len(fulls)

    def _prune_empty_parents(self, folders: set[Path]) -> None:
        """Drop folders left empty, as an object store has no folders: a deleted marker
        dir or partition must not linger as an empty directory."""
        for folder in sorted(folders, key=lambda path: len(path.parts), reverse=True):
            while folder != self.root and self.root in folder.parents:
                try:
                    folder.rmdir()
                except OSError:
                    break
                folder = folder.parent

    def exists(self, path: str) -> bool:
        full = self._full(path)
        self.requests.add("head")
        return full.is_file()

    def size(self, path: str) -> int:
        full = self._full(path)
        self.requests.add("head")
        info = _file_stat(full)
        if info is None:
            raise self._not_found(path)
        return info.st_size

    def open_input(self, path: str) -> BinaryIO:
        full = self._full(path)
        self.requests.add("get")
        try:
            return full.open("rb")
        except _MISSING as missing:
            raise self._not_found(path) from missing

    def read_range(self, path: str, start: int, length: int) -> bytes:
        full = self._full(path)
        self.requests.add("get")
        try:
            descriptor = os.open(full, os.O_RDONLY)
        except _MISSING as missing:
            raise self._not_found(path) from missing
        try:
            return os.pread(descriptor, length, start)
        finally:
            os.close(descriptor)

    def open_output(self, path: str) -> BinaryIO:
        full = self._full(path)
        temp = self._temp_for(full)

        def publish(_: io.FileIO) -> None:
            self.requests.add("put")
            temp.replace(full)

        return PublishOnClose(io.FileIO(temp, "wb"), publish, temp.unlink)


def _file_stat(full: Path) -> os.stat_result | None:
    """A regular file's stat, None when missing (e.g. raced with a delete) or not a file."""
    try:
        info = full.stat()
    except (FileNotFoundError, NotADirectoryError):
        return None
    return info if stat.S_ISREG(info.st_mode) else None
