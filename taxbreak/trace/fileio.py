"""The one way taxbreak opens an input and writes an output (docs/reliability.md, "Inputs and outputs").

Inputs: :func:`check_input` stats a path before anything opens it. A FIFO
blocks a read forever, a device (``/dev/zero``) never ends and a socket
cannot be read: they are refused unread (``input.unreadable``); a file over
the caller's size bound is refused before a byte is read (``input.too_large``).

Outputs: :func:`atomic_output` writes into a temporary file in the target's
folder and renames it into place, so a reader (or a crash, or a full disk)
sees the old file or the new one, never half of one. The target is refused
when it is a symbolic link (the write would land in whatever it points at)
unless the caller asks to follow it, when it is not a regular file, and when
it is one of the command's own inputs (``report T -o T`` would destroy the
trace it reads). A failed write removes its temporary file and leaves the old
file as it was. A command with several outputs names them to :func:`refuse_shared_outputs`
first: two outputs on one file would leave only the one renamed last (``usage.invalid``).
"""
from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from pathlib import Path
from typing import Iterable, Iterator

from .errors import TraceNotFoundError, UsageError

_CHUNK = 1 << 20  # bytes per os.write: a short write on a full disk is caught mid-file


def check_input(path: str | os.PathLike, *, max_bytes: int | None = None, allow_dir: bool = False,
                what: str = "input") -> os.stat_result:
    """The stat of ``path`` after checking that reading it ends: a regular file
    (or a folder when ``allow_dir``), at most ``max_bytes`` long. Links are followed.

    Raises:
        TraceNotFoundError: ``input.not_found``, ``input.unreadable`` (a FIFO,
            socket, device or folder), ``input.too_large`` (over ``max_bytes``).
    """
    try:
        st = os.stat(path)
    except FileNotFoundError as err:
        raise TraceNotFoundError("input.not_found", f"no such {what}", path=str(path),
                                 hint="check the path") from err
    except OSError as err:
        raise TraceNotFoundError("input.unreadable", f"cannot read the {what}: {err.strerror}",
                                 path=str(path)) from err
    if stat.S_ISDIR(st.st_mode):
        if allow_dir:
            return st
        raise TraceNotFoundError("input.unreadable", f"a directory, not a {what} file", path=str(path))
    if not stat.S_ISREG(st.st_mode):
        raise TraceNotFoundError("input.unreadable", f"the {what} is not a regular file (a FIFO, socket or device)",
                                 path=str(path), hint="give the path of a file; it is not opened")
    if max_bytes is not None and st.st_size > max_bytes:
        raise TraceNotFoundError("input.too_large", f"the {what} is {st.st_size:,} bytes, over the "
                                 f"{max_bytes:,} it may have", path=str(path),
                                 hint="check that this is the right file")
    return st


def read_input_bytes(path: str | os.PathLike, *, max_bytes: int, what: str = "input") -> bytes:
    """The bytes of a small input (budget, manifest), checked by :func:`check_input` first;
    reading stops past ``max_bytes`` even if the file grew after the check."""
    check_input(path, max_bytes=max_bytes, what=what)
    try:
        with open(path, "rb") as fh:
            data = fh.read(max_bytes + 1)
    except OSError as err:
        raise TraceNotFoundError("input.unreadable", f"cannot read the {what}: {err.strerror}",
                                 path=str(path)) from err
    if len(data) > max_bytes:
        raise TraceNotFoundError("input.too_large", f"the {what} grew past {max_bytes:,} bytes while read",
                                 path=str(path))
    return data


def file_ids(paths: Iterable[str | os.PathLike]) -> set[tuple[int, int]]:
    """``(st_dev, st_ino)`` of every existing path, and of every file directly in a folder
    among them (a run folder's trace and manifest are inputs too)."""
    ids: set[tuple[int, int]] = set()
    for path in paths:
        try:
            st = os.stat(path)
        except OSError:
            continue
        ids.add((st.st_dev, st.st_ino))
        if stat.S_ISDIR(st.st_mode):
            ids |= _folder_file_ids(path)
    return ids


def _folder_file_ids(folder) -> set[tuple[int, int]]:
    try:
        with os.scandir(folder) as entries:
            return {(s.st_dev, s.st_ino) for e in entries for s in _stat_or_none(e) if stat.S_ISREG(s.st_mode)}
    except OSError:
        return set()


def _stat_or_none(entry: os.DirEntry) -> list[os.stat_result]:
    try:
        return [entry.stat()]
    except OSError:
        return []


def refuse_shared_outputs(outputs: dict[str, str | os.PathLike | None]) -> None:
    """Refuse, before any work, two of one command's outputs on the same file.

    ``outputs`` maps each output's option (``--junit``) to its path; None and ``-``
    (stdout) are skipped. Paths are compared after resolving ``.``, ``..`` and links
    of their folders, and an existing file by its inode too (a hard link is the same file):
    each output is renamed into place, so the later one would silently replace the earlier.

    Raises:
        UsageError: ``usage.invalid`` naming both options.
    """
    seen: dict[object, str] = {}
    for option, path in outputs.items():
        if path is None or str(path) == "-":
            continue
        for key in _file_keys(path):
            if key in seen:
                raise UsageError("usage.invalid", f"{seen[key]} and {option} name the same file", path=str(path),
                                 hint="give each output its own file")
            seen.setdefault(key, option)


def _file_keys(path: str | os.PathLike) -> list[object]:
    """The resolved path of ``path`` and, when it exists, its ``(st_dev, st_ino)``."""
    keys: list[object] = [os.path.realpath(path)]
    with contextlib.suppress(OSError):
        st = os.stat(path)
        keys.append((st.st_dev, st.st_ino))
    return keys


def output_target(path: str | os.PathLike, *, inputs: Iterable[str | os.PathLike] = (),
                  follow_symlinks: bool = False) -> Path:
    """The file an output to ``path`` replaces, after the refusals of the module doc.

    Raises:
        TraceNotFoundError: ``output.is_link``, ``output.is_input``, ``output.unwritable``.
    """
    target = Path(path)
    if target.is_symlink():
        if not follow_symlinks:
            raise TraceNotFoundError("output.is_link", "the output is a symbolic link; it is not written through",
                                     path=str(target), hint="remove the link or name another output file")
        target = Path(os.path.realpath(target))
    try:
        st = os.stat(target)
    except FileNotFoundError:
        return target
    except OSError as err:
        raise unwritable(err, target) from err
    if not stat.S_ISREG(st.st_mode):
        raise TraceNotFoundError("output.unwritable", "the output exists and is not a regular file",
                                 path=str(target), hint="name a file to write")
    if (st.st_dev, st.st_ino) in file_ids(inputs):
        raise TraceNotFoundError("output.is_input", "the output is an input of this command; writing it would "
                                 "destroy the input", path=str(target), hint="name another output file")
    return target


@contextlib.contextmanager
def atomic_output(path: str | os.PathLike, *, inputs: Iterable[str | os.PathLike] = (),
                  follow_symlinks: bool = False) -> Iterator[Path]:
    """A temporary path in ``path``'s folder to write; renamed onto ``path`` when the block
    ends without an exception, removed when it raises (the old file stays as it was).

    Raises:
        TraceNotFoundError: the refusals of :func:`output_target`; ``output.unwritable``
            when the temporary file cannot be made, written or renamed.
    """
    target = output_target(path, inputs=inputs, follow_symlinks=follow_symlinks)
    tmp = _temporary_file(target)
    try:
        yield tmp
        _keep_mode(target, tmp)
        os.replace(tmp, target)
    except OSError as err:
        _remove(tmp)
        raise unwritable(err, target) from err
    except BaseException:
        _remove(tmp)
        raise


def write_output(path: str | os.PathLike, data: bytes | str, *, inputs: Iterable[str | os.PathLike] = (),
                 follow_symlinks: bool = False) -> Path:
    """``data`` (text as UTF-8) written to ``path`` through :func:`atomic_output`; returns the path written."""
    payload = data.encode("utf-8") if isinstance(data, str) else bytes(data)
    with atomic_output(path, inputs=inputs, follow_symlinks=follow_symlinks) as tmp:
        fd = os.open(tmp, os.O_WRONLY | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0))
        try:
            for start in range(0, len(payload), _CHUNK):
                write_chunk(fd, memoryview(payload)[start:start + _CHUNK])
        finally:
            os.close(fd)
    return Path(path)


def write_chunk(fd: int, chunk: memoryview) -> None:
    """One chunk written whole (``os.write`` may write less than asked)."""
    while len(chunk):
        chunk = chunk[os.write(fd, chunk):]


def unreadable(err: OSError, path: str | os.PathLike, what: str = "input") -> TraceNotFoundError:
    """``input.unreadable`` (``input.not_found`` for a file gone meanwhile) for an OSError raised
    while reading ``path``: the CLI then reports an input, not an output (cli/errors.py)."""
    if isinstance(err, FileNotFoundError):
        return TraceNotFoundError("input.not_found", f"no such {what}", path=str(path), hint="check the path")
    return TraceNotFoundError("input.unreadable", f"cannot read the {what}: {err.strerror or err}", path=str(path))


def unwritable(err: OSError, path: str | os.PathLike) -> TraceNotFoundError:
    """``output.unwritable`` for an OSError raised while writing ``path``."""
    return TraceNotFoundError("output.unwritable", err.strerror or str(err), path=str(path),
                              hint="check that the output's folder exists and is writable, and the disk has space")


def _temporary_file(target: Path) -> Path:
    try:
        # hidden (no folder scan takes it for a trace); ends in the target's name, so a writer
        # that picks gzip from the suffix (torch's export_chrome_trace) writes the same bytes
        fd, name = tempfile.mkstemp(prefix=".partial-", suffix=f"-{target.name[-96:]}", dir=target.parent)
    except OSError as err:
        raise unwritable(err, target) from err
    os.close(fd)
    return Path(name)


def _process_umask() -> int:
    """The umask, read once at import: probing it later (``os.umask(0)`` then back) would give a
    file that another thread (the cache's background writer) creates meanwhile a mode of 0666."""
    umask = os.umask(0o022)
    os.umask(umask)
    return umask


_UMASK = _process_umask()


def _keep_mode(target: Path, tmp: Path) -> None:
    """mkstemp makes 0600 files: give the new file the old one's mode, else the umask's default."""
    try:
        mode = stat.S_IMODE(os.stat(target).st_mode)
    except OSError:
        mode = 0o666 & ~_UMASK
    os.chmod(tmp, mode)


def _remove(tmp: Path) -> None:
    with contextlib.suppress(OSError):
        os.unlink(tmp)
