"""Files the package writes and reads: atomically, regular files only, the path named on failure.

Every output file of the package and of the figure scripts goes through :func:`atomic_write`
(or :func:`savefig` / :func:`write_text` on top of it); every input file a command or the
figure cache reads goes through :func:`read_regular`. The rules, one place each:

* an output path is checked before any work (:func:`check_output_file`): its directory
  exists and takes a new file, the path is not a directory, FIFO, device or socket, and the
  file system has room for it;
* the data go to a temporary file in the same directory, which is flushed, ``fsync``-ed and
  renamed over the target (:func:`os.replace`): a reader sees the old file or the new one,
  never a partial or 0-byte file, and a failed write (a full disk, a file-size limit, an
  interrupt) leaves the old file as it was and removes the temporary one;
* a failure is a :class:`FileWriteError` whose message names the file and the cause;
* an input is opened without blocking (a FIFO does not hang the reader), must be a regular
  file (``/dev/zero`` or a link to it is refused) and is read only up to a size limit.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

__all__ = ["FileWriteError", "FileReadError", "check_output_file", "atomic_write", "write_text",
           "savefig", "read_regular", "FIGURE_FORMATS"]

#: Figure formats matplotlib writes (by extension).
FIGURE_FORMATS = frozenset({"png", "pdf", "svg", "svgz", "eps", "ps", "jpg", "jpeg", "tif", "tiff",
                            "webp", "pgf", "raw", "rgba"})

#: Free space (bytes) an output needs on its file system before the work starts: a figure of
#: the commands is 20 to 200 kB.
MIN_FREE_BYTES = 4 * 2**20


class FileWriteError(OSError):
    """An output file could not be written; the message names it. The old file is unchanged."""

    def __str__(self) -> str:
        return str(self.strerror)


class FileReadError(OSError):
    """An input file could not be read as a regular file; the message names it."""

    def __str__(self) -> str:
        return str(self.strerror)


def _kind(mode: int) -> str | None:
    """What a non-regular file is ('a directory', 'a FIFO', …), or None for a regular file."""
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def _strerror(exc: OSError) -> str:
    return exc.strerror or str(exc) or type(exc).__name__


def check_output_file(path: str | os.PathLike[str], what: str = "output", *,
                      min_free: int = MIN_FREE_BYTES) -> Path:
    """Refuse (``ValueError``) an output file that could only fail after the work.

    Parameters
    ----------
    path : str or path-like
        The file to be written. A symbolic link is followed (the file it names is replaced).
    what : str
        How the messages name the output (an option such as ``"--plot"``).
    min_free : int
        Bytes that must be free on the file system of ``path``.

    Returns
    -------
    Path
        The resolved path :func:`atomic_write` will replace.

    Raises
    ------
    ValueError
        If the name is empty or holds a NUL byte, the directory does not exist or takes no new
        file, the path is a directory, FIFO, device or socket, or the disk is (nearly) full.
    """
    text = os.fspath(path)
    if not text or "\x00" in text:
        raise ValueError(f"{what}: not a valid file name: {text!r}")
    p = Path(text).expanduser()
    with contextlib.suppress(OSError, RuntimeError):
        p = p.resolve()  # follow a link to the file it names
    try:
        st = os.stat(p)
    except FileNotFoundError:
        st = None
    except OSError as exc:
        raise ValueError(f"{what}: cannot use {str(p)!r}: {_strerror(exc)}") from None
    if st is not None and (kind := _kind(st.st_mode)) is not None:
        raise ValueError(f"{what}: {str(p)!r} is {kind}, not a regular file")
    parent = p.parent
    if not parent.is_dir():
        raise ValueError(f"{what}: directory {str(parent)!r} does not exist")
    try:  # the rename needs a new file in the directory, not only a writable target
        fd, tmp = tempfile.mkstemp(dir=parent, prefix=f".{p.name}.", suffix=".check")
    except OSError as exc:
        raise ValueError(f"{what}: cannot write {str(p)!r}: {_strerror(exc)}") from None
    os.close(fd)
    with contextlib.suppress(OSError):
        os.unlink(tmp)
    if st is not None and not os.access(p, os.W_OK):
        raise ValueError(f"{what}: cannot write {str(p)!r}: permission denied")
    try:
        vfs = os.statvfs(parent)
        free = vfs.f_bavail * vfs.f_frsize
    except (OSError, AttributeError):  # pragma: no cover - not POSIX
        free = None
    if free is not None and free < min_free:
        raise ValueError(f"{what}: the file system of {str(p)!r} has only {free / 2**20:.2g} MiB "
                         f"free (at least {min_free / 2**20:.0f} MiB needed); free space or write "
                         "elsewhere")
    return p


def _mode_for(p: Path) -> int:
    """Permissions of the new file: the old file's, else 0666 less the umask."""
    with contextlib.suppress(OSError):
        return stat.S_IMODE(os.stat(p).st_mode)
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


def atomic_write(path: str | os.PathLike[str], write: Callable[[IO[bytes]], Any],
                 what: str = "output") -> Path:
    """Write a file through ``write(fh)`` on a temporary file, then rename it over ``path``.

    Parameters
    ----------
    path : str or path-like
        The target. An existing target must be a regular file (a link is followed).
    write : callable
        Called once with a binary file object open for writing.
    what : str
        How the error message names the output.

    Returns
    -------
    Path
        The file written.

    Raises
    ------
    FileWriteError
        If the target is not a regular file, or writing, flushing or renaming fails (a full
        disk, a size limit, permissions). The message names the file; the target is unchanged
        and no temporary file is left.
    """
    given = Path(os.fspath(path)).expanduser()
    p = given
    with contextlib.suppress(OSError, RuntimeError):
        p = p.resolve()
    shown = f"{str(given)!r}" if p == given.absolute() else f"{str(given)!r} (-> {str(p)!r})"
    try:
        kind = _kind(os.stat(p).st_mode)
    except FileNotFoundError:
        kind = None
    except OSError as exc:
        raise FileWriteError(exc.errno, f"{what}: could not write {shown}: {_strerror(exc)}") from None
    if kind is not None:
        raise FileWriteError(errno.EINVAL, f"{what}: could not write {shown}: it is {kind}, "
                                           "not a regular file")
    mode = _mode_for(p)
    left = "the old file is unchanged" if p.exists() else "no file was written"
    try:
        fd, tmp = tempfile.mkstemp(dir=p.parent, prefix=f".{p.name}.", suffix=".tmp")
    except OSError as exc:
        raise FileWriteError(exc.errno, f"{what}: could not write {shown}: {_strerror(exc)}") from None
    try:
        with os.fdopen(fd, "wb") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, p)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(exc, OSError) and not isinstance(exc, FileWriteError):
            raise FileWriteError(exc.errno, f"{what}: could not write {shown}: {_strerror(exc)} "
                                            f"({left})") from None
        raise
    with contextlib.suppress(OSError):  # make the rename itself durable
        dir_fd = os.open(p.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
    return p


def write_text(path: str | os.PathLike[str], text: str, what: str = "output") -> Path:
    """:func:`atomic_write` of ``text`` in UTF-8."""
    data = text.encode("utf-8")
    return atomic_write(path, lambda fh: fh.write(data), what)


def savefig(fig: Any, path: str | os.PathLike[str], what: str = "--plot", **kwargs: Any) -> Path:
    """``fig.savefig`` through :func:`atomic_write`; the format is the file's extension (png if none)."""
    suffix = Path(os.fspath(path)).suffix.lower().lstrip(".")
    fmt = suffix if suffix in FIGURE_FORMATS else "png"
    return atomic_write(path, lambda fh: fig.savefig(fh, format=fmt, **kwargs), what)


def read_regular(path: str | os.PathLike[str], max_bytes: int, what: str = "input") -> bytes:
    """The bytes of a regular file of at most ``max_bytes``.

    The file is opened without blocking (``O_NONBLOCK``: a FIFO does not hang the reader) and
    checked with ``fstat`` on the open descriptor (no race between check and read).

    Raises
    ------
    FileNotFoundError
        If ``path`` does not exist (callers treat that apart).
    FileReadError
        If it is not a regular file, is larger than ``max_bytes``, or cannot be read; the
        message names the file.
    """
    p = os.fspath(path)
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(p, flags)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise FileReadError(exc.errno, f"{what}: cannot read {p!r}: {_strerror(exc)}") from None
    try:
        st = os.fstat(fd)
        kind = _kind(st.st_mode)
        if kind is not None:
            raise FileReadError(errno.EINVAL, f"{what}: {p!r} is {kind}, not a regular file")
        if st.st_size > max_bytes:
            raise FileReadError(errno.EFBIG, f"{what}: {p!r} has {st.st_size} bytes, more than the "
                                             f"{max_bytes} allowed")
        chunks, total = [], 0
        while True:
            chunk = os.read(fd, min(1 << 20, max_bytes + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            if total > max_bytes:  # grew while read
                raise FileReadError(errno.EFBIG, f"{what}: {p!r} is larger than the {max_bytes} "
                                                 "bytes allowed")
        return b"".join(chunks)
    except FileReadError:
        raise
    except OSError as exc:
        raise FileReadError(exc.errno, f"{what}: cannot read {p!r}: {_strerror(exc)}") from None
    finally:
        os.close(fd)
