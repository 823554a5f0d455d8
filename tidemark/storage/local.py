"""Local filesystem backend: a directory is the root, files are the objects.

Writes go to a temporary file in the target directory and are published with a rename
(or a hard link for create-if-absent, which fails when the target exists), so readers
never see partial content. Requests are counted under the same operation names as S3 so
benchmarks compare like with like.

Every file is reached without following a symbolic link, at every request: the request
walks from ``/`` to its folder one component at a time (``openat`` with ``O_NOFOLLOW``;
the root's path is resolved once, when the storage is opened) and creates, opens,
renames, links and deletes its file relative to that folder's descriptor. So a folder
swapped for a link after a first request (a marker dir linked out of the table) is
refused at the next one, and nothing is written through it (PERMISSION_DENIED naming
the path as the caller gave it, never where the link leads). A table's own files and
folders are never links, so a link inside the table is refused too; listings skip
links. ``local_file`` alone names a file for pyarrow to open itself: checked the same
way when it is asked for, it serves reads only.
"""

from __future__ import annotations

import contextlib
import errno
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
"""What a temporary's name adds to its target's (``_make_temp``)."""
FOLDER_RACE_ATTEMPTS = 5
"""Tries at making a temporary's folder and the temporary in it (``_make_temp``)."""
_FOLDER = getattr(os, "O_PATH", os.O_RDONLY) | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
"""A folder on the way: ``O_PATH`` (Linux) needs search permission only, as a lookup."""
_LISTING = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
"""``O_NONBLOCK``: a FIFO planted in a table opens at once (then refused), never blocks."""
_NEW = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


class LocalStorage(Storage):
    """Objects under a local directory, opened from a path or ``file://`` URI; ``uri`` is
    the absolute, normalised path."""

    def __init__(self, uri: str | LocalUri) -> None:
        """``uri`` as given, or parsed already (``open_storage``: parsed once)."""
        parsed = uri if isinstance(uri, LocalUri) else parse_uri(uri)
        if not isinstance(parsed, LocalUri):
            raise TypeError(f"not a local URI: {uri}")
        self.uri = parsed.canonical
        self.root = Path(parsed.root)
        self.requests = RequestCounter()
        self._root_names = Path(os.path.realpath(self.root)).parts[1:]

    def __reduce__(self) -> tuple[Any, ...]:
        return (LocalStorage, (self.uri,))

    @property
    def max_path_bytes(self) -> int:
        root = len(os.fsencode(self.root.absolute())) + len("/")
        return PATH_MAX - len("\0") - root - _TEMP_EXTRA_BYTES

    def local_file(self, path: str) -> Path:
        """The file holding object ``path`` (checked as every request), for a reader that
        opens it itself: pyarrow reads a file it opened without holding Python's lock,
        where reading a Python stream takes it for every read."""
        self.requests.add("get")
        with contextlib.suppress(NotFoundError):
            os.close(self._open_read(path))
        return self.root / path

    @contextlib.contextmanager
    def _folder(self, directory: str, path: str) -> Iterator[int]:
        descriptor = self._open_folder(directory, path)
        try:
            yield descriptor
        finally:
            os.close(descriptor)

    def _open_folder(self, directory: str, path: str, *, create: bool = False) -> int:
        """A descriptor of the root's folder ``directory``, reached from ``/`` with no
        link followed (``create``: making missing folders); ``path`` is what a refusal
        names."""
        descriptor = os.open("/", _FOLDER)
        try:
            for name in (*self._root_names, *filter(None, directory.split("/"))):
                parent = descriptor
                descriptor = self._step(parent, name, path, create=create)
                os.close(parent)
        except BaseException:
            os.close(descriptor)
            raise
        return descriptor

    def _step(self, parent: int, name: str, path: str, *, create: bool) -> int:
        try:
            return os.open(name, _FOLDER, dir_fd=parent)
        except FileNotFoundError:
            if not create:
                raise
        except NotADirectoryError:  # a file, or a link (O_NOFOLLOW | O_DIRECTORY)
            if stat.S_ISLNK(os.stat(name, dir_fd=parent, follow_symlinks=False).st_mode):
                raise self._linked(path) from None
            raise
        with contextlib.suppress(FileExistsError):
            os.mkdir(name, dir_fd=parent)
        return self._step(parent, name, path, create=False)

    def _linked(self, path: str) -> PermissionDeniedError:
        return PermissionDeniedError(
            f"{path!r} in {self.uri} is reached through a symbolic link, which could lead "
            "out of the table: refused",
            field="path",
        )

    def _not_found(self, path: str) -> NotFoundError:
        return NotFoundError(f"no object {path!r} in {self.uri}", field="path")

    def _open_read(self, path: str) -> int:
        """A read descriptor of the regular file ``path``."""
        directory, _, name = validate_path(path).rpartition("/")
        try:
            with self._folder(directory, path) as folder:
                try:
                    descriptor = os.open(name, _READ, dir_fd=folder)
                except OSError as error:
                    if error.errno == errno.ELOOP:
                        raise self._linked(path) from None
                    raise
        except _MISSING as missing:
            raise self._not_found(path) from missing
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            os.close(descriptor)
            raise self._not_found(path)
        return descriptor

    def _stat(self, path: str) -> os.stat_result | None:
        """The regular file's stat, None when missing or not a file; a link is refused."""
        directory, _, name = validate_path(path).rpartition("/")
        try:
            with self._folder(directory, path) as folder:
                info = os.stat(name, dir_fd=folder, follow_symlinks=False)
        except _MISSING:
            return None
        if stat.S_ISLNK(info.st_mode):
            raise self._linked(path)
        return info if stat.S_ISREG(info.st_mode) else None

    @contextlib.contextmanager
    def _new_temp(self, path: str) -> Iterator[tuple[int, str, str, int]]:
        """``_make_temp``'s folder, the target's name, the temporary's name and its write
        descriptor; the temporary is removed unless renamed or linked to the target."""
        directory, _, name = validate_path(path).rpartition("/")
        folder, temp, descriptor = self._make_temp(directory, name, path)
        try:
            yield folder, name, temp, descriptor
        finally:
            os.close(descriptor)
            with contextlib.suppress(FileNotFoundError):
                os.unlink(temp, dir_fd=folder)
            os.close(folder)

    def _make_temp(self, directory: str, name: str, path: str) -> tuple[int, str, int]:
        """The target's folder (made if missing) and a new empty temporary beside the
        target. A delete in the same folder prunes it once empty
        (``_prune_empty_parents``), between making it and making the temporary in it:
        lock waiters' tickets come and go so in one folder, and a planner whose trigger
        and a client wanted one table's lock at once failed a call with INTERNAL. Once
        the temporary exists the folder is not empty, so it stays."""
        temp = f".{name}{TEMP_MARKER}{uuid.uuid4().hex}"
        attempt = 1
        while True:
            folder = None
            try:
                folder = self._open_folder(directory, path, create=True)
                return folder, temp, os.open(temp, _NEW, 0o666, dir_fd=folder)
            except BaseException as error:
                if folder is not None:
                    os.close(folder)
                if not isinstance(error, FileNotFoundError) or attempt == FOLDER_RACE_ATTEMPTS:
                    raise
                attempt += 1

    def read(self, path: str) -> bytes:
        self.requests.add("get")
        with open(self._open_read(path), "rb") as stream:
            return stream.read()

    def write(self, path: str, data: bytes) -> None:
        self.requests.add("put")
        with self._new_temp(path) as (folder, name, temp, descriptor):
            _write_all(descriptor, data)
            os.replace(temp, name, src_dir_fd=folder, dst_dir_fd=folder)

    def create_if_absent(self, path: str, data: bytes) -> bool:
        self.requests.add("conditional_put")
        with self._new_temp(path) as (folder, name, temp, descriptor):
            _write_all(descriptor, data)
            try:
                os.link(temp, name, src_dir_fd=folder, dst_dir_fd=folder, follow_symlinks=False)
            except FileExistsError:
                return False
        return True

    def list(self, prefix: str) -> Iterator[FileInfo]:
        validate_prefix(prefix)
        self.requests.add("list")
        directory = prefix.rpartition("/")[0]
        found = []
        try:
            with self._folder(directory, prefix) as folder:
                for below, _, names, descriptor in os.fwalk(".", dir_fd=folder):
                    parent = f"{directory}/{below[2:]}" if below != "." else directory
                    for name in names:
                        relative = f"{parent}/{name}".lstrip("/")
                        info = _file_stat(name, descriptor)
                        if TEMP_MARKER not in name and relative.startswith(prefix) and info:
                            found.append(FileInfo(relative, info.st_size, info.st_mtime))
        except (FileNotFoundError, NotADirectoryError):
            return iter(())
        return iter(sorted(found, key=lambda info: info.path))

    def list_dir(self, directory: str) -> ListDirResult:
        directory = validate_directory(directory)
        self.requests.add("list")
        files: list[FileInfo] = []
        dirs: list[str] = []
        try:
            with self._listing(directory) as listing, os.scandir(listing) as entries:
                for entry in entries:
                    path = f"{directory}/{entry.name}" if directory else entry.name
                    if entry.is_dir(follow_symlinks=False):
                        dirs.append(path)
                        continue
                    info = _file_stat(entry.name, listing)
                    if info is not None and TEMP_MARKER not in entry.name:
                        files.append(FileInfo(path, info.st_size, info.st_mtime))
        except (FileNotFoundError, NotADirectoryError):
            return ListDirResult((), ())
        return ListDirResult.from_unsorted(files, dirs)

    @contextlib.contextmanager
    def _listing(self, directory: str) -> Iterator[int]:
        """A readable descriptor of the folder, for ``os.scandir``."""
        with self._folder(directory, directory) as folder:
            descriptor = os.open(".", _LISTING, dir_fd=folder)
        try:
            yield descriptor
        finally:
            os.close(descriptor)

    def partial_files(self, directory: str) -> tuple[PartialFile, ...]:
        """``.<name>.tidemark-tmp-<id>`` files of writers killed before their rename."""
        directory = validate_directory(directory)
        self.requests.add("list")
        prefix = f"{directory}/" if directory else ""
        found = []
        try:
            with self._listing(directory) as listing, os.scandir(listing) as entries:
                for name in sorted(entry.name for entry in entries):
                    hidden_target, infix, _ = name.partition(TEMP_MARKER)
                    if not infix or not hidden_target.startswith(".") or len(hidden_target) < 2:
                        continue
                    info = _file_stat(name, listing)
                    if info is not None:  # else published or deleted since the listing
                        target = prefix + hidden_target[1:]
                        found.append(PartialFile(prefix + name, target, info.st_mtime))
        except (FileNotFoundError, NotADirectoryError):
            return ()
        return tuple(found)

    def delete_many(self, paths: Iterable[str]) -> int:
        names: dict[str, list[str]] = {}
        for path in paths:
            directory, _, name = validate_path(path).rpartition("/")
            names.setdefault(directory, []).append(name)
        count = sum(len(batch) for batch in names.values())
        if count:
            self.requests.add("delete", -(-count // DELETE_BATCH_SIZE))
        for directory, batch in names.items():
            with (
                contextlib.suppress(FileNotFoundError, NotADirectoryError),
                self._folder(directory, directory) as folder,
            ):
                for name in batch:
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(name, dir_fd=folder)
        self._prune_empty_parents(set(names))
        return count

    def _prune_empty_parents(self, folders: set[str]) -> None:
        """Drop folders left empty, as an object store has no folders: a deleted marker
        dir or partition must not linger as an empty directory."""
        for folder in sorted(folders, key=lambda path: path.count("/"), reverse=True):
            while folder:
                parent, _, name = folder.rpartition("/")
                try:
                    with self._folder(parent, folder) as descriptor:
                        os.rmdir(name, dir_fd=descriptor)
                except OSError:
                    break
                folder = parent

    def exists(self, path: str) -> bool:
        self.requests.add("head")
        return self._stat(path) is not None

    def size(self, path: str) -> int:
        self.requests.add("head")
        info = self._stat(path)
        if info is None:
            raise self._not_found(path)
        return info.st_size

    def open_input(self, path: str) -> BinaryIO:
        self.requests.add("get")
        return open(self._open_read(path), "rb")

    def read_range(self, path: str, start: int, length: int) -> bytes:
        self.requests.add("get")
        descriptor = self._open_read(path)
        try:
            return os.pread(descriptor, length, start)
        finally:
            os.close(descriptor)

    def open_output(self, path: str) -> BinaryIO:
        directory, _, name = validate_path(path).rpartition("/")
        folder, temp, descriptor = self._make_temp(directory, name, path)

        def publish(_: io.FileIO) -> None:
            self.requests.add("put")
            try:
                os.replace(temp, name, src_dir_fd=folder, dst_dir_fd=folder)
            finally:
                os.close(folder)

        def discard() -> None:
            try:
                os.unlink(temp, dir_fd=folder)
            finally:
                os.close(folder)

        return PublishOnClose(io.FileIO(descriptor, "wb"), publish, discard)


def _write_all(descriptor: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(descriptor, view) :]


def _file_stat(name: str, folder: int) -> os.stat_result | None:
    """A regular file's stat (a link is not followed), None when missing (e.g. raced with
    a delete) or not a file."""
    try:
        info = os.stat(name, dir_fd=folder, follow_symlinks=False)
    except (FileNotFoundError, NotADirectoryError):
        return None
    return info if stat.S_ISREG(info.st_mode) else None
