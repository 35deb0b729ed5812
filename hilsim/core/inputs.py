"""One bounded reader for every input file a command names (``docs/limits.md``, "Inputs").

A command reads files it did not write: specs, plans, configs, simulator logs, traces.
Whatever the path holds, reading it ends in bounded time and memory or in one line:

* **Only regular files.** A FIFO would block the read forever, a device (``/dev/zero``,
  ``/dev/urandom``) never ends, a folder is not a file: each is refused, naming what it
  is. The file is opened with ``O_NONBLOCK`` (a FIFO opens at once) and checked with
  ``fstat`` on the open descriptor, so a path swapped after a check is still caught.
* **Sparse holes** read as zeros: refused past ``max_zero_run_bytes``
  (:func:`hilsim.core.limits.check_sparse`).
* **Size.** A whole-file read stops at ``max_input_bytes``; a gzip input inflates at most
  ``max_decompression_ratio`` bytes per compressed byte (streamed, checked per block).

Every refusal is one :class:`~hilsim.core.errors.HilsimError` line naming the file and
``what`` it was meant to be.
"""

from __future__ import annotations

import fcntl
import os
import stat
import zlib
from pathlib import Path
from typing import BinaryIO

from hilsim.core import limits
from hilsim.core.errors import HilsimError

_CHUNK = 1 << 20
#: the first two bytes of a gzip file
GZIP_MAGIC = b"\x1f\x8b"

_KINDS = (
    (stat.S_ISDIR, "a folder"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def kind_of(mode: int) -> str:
    """What a non-regular ``st_mode`` is, in words (``'a FIFO (named pipe)'``, ...)."""
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def _refuse(path: Path, what: str, mode: int) -> HilsimError:
    return HilsimError(f"{path}: is {kind_of(mode)}, expected {what}")


def _mode(source: Path, missing: str, what: str) -> int:
    """``st_mode`` of ``source`` (links followed); one line when it is missing or unreadable."""
    try:
        return os.stat(source).st_mode
    except FileNotFoundError:
        raise HilsimError(f"{source}: {missing} (expected {what})") from None
    except OSError as exc:
        raise HilsimError(f"{source}: cannot read ({exc.strerror or exc})") from None


def input_kind(path: str | os.PathLike[str], what: str = "a file") -> str:
    """``"file"`` or ``"folder"`` for an input that may be either (a profile: bundle folder
    or profile file); anything else (missing, FIFO, device, socket) is one line."""
    source = Path(path)
    mode = _mode(source, "no such file or folder", what)
    if stat.S_ISDIR(mode):
        return "folder"
    if not stat.S_ISREG(mode):
        raise _refuse(source, what, mode)
    return "file"


def check_file(path: str | os.PathLike[str], what: str = "a file") -> Path:
    """``path`` if it is a regular file (without holes past the limit); else one line.

    For readers that open the file themselves (pandas, SQLite): the check runs on the
    path, so use :func:`open_input` where the reader takes a file object.
    """
    source = Path(path)
    mode = _mode(source, "no such file", what)
    if not stat.S_ISREG(mode):
        raise _refuse(source, what, mode)
    limits.check_sparse(source)
    return source


def open_input(path: str | os.PathLike[str], what: str = "a file") -> BinaryIO:
    """Open a regular file for reading (binary); anything else is one line (module doc)."""
    source = Path(path)
    try:
        fd = os.open(source, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise HilsimError(f"{source}: no such file (expected {what})") from None
    except IsADirectoryError:
        raise HilsimError(f"{source}: is a folder, expected {what}") from None
    except OSError as exc:
        try:  # a socket cannot be opened (ENXIO): name what the path is
            mode = os.stat(source).st_mode
        except OSError:
            mode = stat.S_IFREG
        if not stat.S_ISREG(mode):
            raise _refuse(source, what, mode) from None
        raise HilsimError(f"{source}: cannot read ({exc.strerror or exc})") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise _refuse(source, what, info.st_mode)
        limits.check_sparse(source)
        flags = fcntl.fcntl(fd, fcntl.F_GETFL)
        fcntl.fcntl(fd, fcntl.F_SETFL, flags & ~os.O_NONBLOCK)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def _read_all(handle: BinaryIO, source: Path) -> bytes:
    cap = limits.value("max_input_bytes")
    parts, total = [], 0
    while True:
        block = handle.read(_CHUNK)
        if not block:
            return b"".join(parts)
        total += len(block)
        if total > cap:
            raise limits.exceeded(source, "max_input_bytes", f"more than {cap} bytes")
        parts.append(block)


def read_input(path: str | os.PathLike[str], what: str = "a file") -> bytes:
    """The bytes of a regular file, at most ``max_input_bytes``."""
    source = Path(path)
    try:
        with open_input(source, what) as handle:
            return _read_all(handle, source)
    except OSError as exc:
        raise HilsimError(f"{source}: cannot read ({exc.strerror or exc})") from None


def read_input_text(path: str | os.PathLike[str], what: str = "a text file") -> str:
    """A regular file's text (UTF-8; a BOM is dropped); undecodable bytes are one line
    naming the line they are on."""
    source = Path(path)
    data = read_input(source, what)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise HilsimError(f"{source}: line {line}: not UTF-8 text (byte {exc.start})") from None


#: inflated bytes kept while the first pass still counts: an input inflating past this is
#: counted to its end first (nothing kept), then inflated again to be kept, so a bomb is
#: refused at the memory of a block, not of what it inflated to before the refusal
_KEEP_WHILE_COUNTING = 64 << 20


def _inflate_pass(data: bytes, source: object, keep_up_to: int | None) -> list[bytes] | None:
    """One pass over every gzip member of ``data``, each block checked against
    ``max_decompression_ratio`` and ``max_input_bytes`` as it comes out: the blocks when
    they total at most ``keep_up_to`` bytes (``None``: no bound), else ``None`` (they were
    counted and dropped)."""
    guard = limits.Inflation(source, len(data))
    cap = limits.value("max_input_bytes")
    parts: list[bytes] | None = []
    total = 0
    pending = data
    try:
        while pending:
            engine = zlib.decompressobj(16 + zlib.MAX_WBITS)
            chunk = engine.decompress(pending, _CHUNK)
            while True:
                total += len(chunk)
                guard.check(total)
                if total > cap:
                    raise limits.exceeded(
                        source, "max_input_bytes", f"inflates past {cap} bytes"
                    )
                if parts is not None and keep_up_to is not None and total > keep_up_to:
                    parts = None  # count on without keeping
                if parts is not None:
                    parts.append(chunk)
                # at a member's end the rest of the input is ``unused_data`` (and still
                # ``unconsumed_tail``, which an ended engine would take forever)
                if engine.eof or not engine.unconsumed_tail:
                    break
                chunk = engine.decompress(engine.unconsumed_tail, _CHUNK)
            if not engine.eof:
                raise HilsimError(f"{source}: damaged gzip file (compressed data ends early)")
            pending = engine.unused_data
            if pending and not pending.startswith(GZIP_MAGIC):
                if not pending.strip(b"\0"):  # zero padding after the last member
                    break
                raise HilsimError(f"{source}: damaged gzip file (garbage after the data)")
    except zlib.error as exc:
        raise HilsimError(f"{source}: damaged gzip file ({exc})") from None
    return parts


def inflate(data: bytes, source: object) -> bytes:
    """Decompress gzip ``data`` (all members), at most ``max_decompression_ratio`` bytes
    per compressed byte (after a 1 MiB allowance) and ``max_input_bytes`` in all, both
    checked block by block as it inflates. An input inflating past
    :data:`_KEEP_WHILE_COUNTING` is first counted to its end keeping nothing (a bomb is
    refused holding one block), then inflated again."""
    parts = _inflate_pass(data, source, _KEEP_WHILE_COUNTING)
    if parts is None:
        parts = _inflate_pass(data, source, None)
    return b"".join(parts or [])


def read_maybe_gzip(path: str | os.PathLike[str], what: str = "a file") -> bytes:
    """A regular file's bytes, inflated (guarded, :func:`inflate`) when it is gzip."""
    source = Path(path)
    raw = read_input(source, what)
    return inflate(raw, source) if raw[:2] == GZIP_MAGIC else raw


__all__ = [
    "GZIP_MAGIC",
    "check_file",
    "inflate",
    "input_kind",
    "kind_of",
    "open_input",
    "read_input",
    "read_input_text",
    "read_maybe_gzip",
]
