"""The defensive half of `funcgrad.io`: reading a checkpoint archive without trusting it, and
the temporary files of an atomic save.

Every size is checked against the zip directory and the `.npy` header before anything is
allocated or decompressed; problems are `ArchiveError`s, which `funcgrad.io` turns into
`CheckpointError`s naming the file and the key path. Imports only the standard library and
numpy; must not import any funcgrad module.
"""

import math
import os
import re
import stat
import struct
import tempfile
import zipfile
import zlib

import numpy as np
from numpy.lib import format as npy_format

__all__ = ["ArchiveError", "READ_ERRORS", "SafeArchive", "make_temp_file",
           "remove_stale_temp_files"]

# Deflate cannot expand data more than ~1032:1 (258-byte matches in 2-bit codes); 1 KiB of slack
# covers tiny entries.
_MAX_DEFLATE_RATIO = 1032
_DEFLATE_SLACK = 1024
# `save` writes entries uncompressed, so a genuine checkpoint needs about 1x its file size.
DEFAULT_EXPANSION = 8
_CHUNK = 1 << 24
# What zipfile, zlib and numpy's header parser raise on damaged or crafted input.
READ_ERRORS = (OSError, EOFError, ValueError, TypeError, LookupError, OverflowError,
               SyntaxError, MemoryError, RuntimeError, struct.error, zlib.error,
               zipfile.BadZipFile)


class ArchiveError(Exception):
    """What is wrong with a checkpoint file, with a hint; funcgrad.io adds the file and path."""


# ---------------------------------------------------------------------------------------------
# Reading


class SafeArchive:
    """A checkpoint's zip archive, opened only once its directory passes the size checks.

    `limit` is the most bytes all entries may take once read (None: `DEFAULT_EXPANSION` times
    the file's size). Each entry may be read once; `read(name)` returns its array.
    """

    def __init__(self, path: str, limit: int | None):
        info = os.stat(path)
        if stat.S_ISDIR(info.st_mode):
            raise IsADirectoryError(path)
        if not stat.S_ISREG(info.st_mode):
            raise ArchiveError("it is not a regular file")
        self._zip = zipfile.ZipFile(path)
        try:
            self._entries = _checked_directory(self._zip, info.st_size, limit)
        except BaseException:
            self._zip.close()
            raise
        self._read: set[str] = set()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._zip.close()

    def read(self, name: str) -> np.ndarray:
        """The array stored as `name`.npy; an entry read twice is an error (no aliasing)."""
        info = self._entries.get(name + ".npy")
        if info is None:
            raise ArchiveError(f"the entry {name!r} it refers to is missing from the archive")
        if name in self._read:
            raise ArchiveError(f"the entry {name!r} is used twice; each leaf has its own entry")
        self._read.add(name)
        try:
            with self._zip.open(info) as member:
                return _read_npy(member, name, info.file_size)
        except MemoryError:
            raise ArchiveError(f"there is not enough memory to read the entry {name!r} "
                               f"({info.file_size} bytes)") from None
        except READ_ERRORS as e:
            raise ArchiveError(f"the entry {name!r} is damaged ({type(e).__name__}: {e})") from None


def _checked_directory(archive: zipfile.ZipFile, file_size: int, limit: int | None) -> dict:
    entries: dict[str, zipfile.ZipInfo] = {}
    for info in archive.infolist():
        if info.filename in entries:
            raise ArchiveError(f"the archive lists the entry {info.filename!r} twice")
        _check_entry(info)
        entries[info.filename] = info
    stored = sum(info.compress_size for info in entries.values())
    if stored > file_size:
        raise ArchiveError(f"its directory claims {stored} bytes of entries in a file of "
                           f"{file_size} bytes")
    total = sum(info.file_size for info in entries.values())
    if limit is None:
        limit = DEFAULT_EXPANSION * file_size
    if total > limit:
        raise ArchiveError(f"its entries would take {total} bytes once read, more than the limit "
                           f"of {limit} bytes; if the file is trusted, pass a larger max_bytes=")
    return entries


def _check_entry(info: zipfile.ZipInfo) -> None:
    name = info.filename
    if info.flag_bits & 0x1:
        raise ArchiveError(f"the entry {name!r} is encrypted")
    if info.compress_type == zipfile.ZIP_STORED:
        if info.file_size != info.compress_size:
            raise ArchiveError(f"the uncompressed entry {name!r} claims {info.file_size} bytes "
                               f"but stores {info.compress_size}")
    elif info.compress_type == zipfile.ZIP_DEFLATED:
        if info.file_size > _MAX_DEFLATE_RATIO * info.compress_size + _DEFLATE_SLACK:
            raise ArchiveError(f"the entry {name!r} claims to expand from {info.compress_size} to "
                               f"{info.file_size} bytes, beyond what deflate can do (a zip bomb?)")
    else:
        raise ArchiveError(f"the entry {name!r} uses zip compression method "
                           f"{info.compress_type}; checkpoints are stored or deflated")


def _read_npy(member, name: str, entry_size: int) -> np.ndarray:
    version = npy_format.read_magic(member)
    if version == (1, 0):
        shape, fortran_order, dtype = npy_format.read_array_header_1_0(member)
    elif version == (2, 0):
        shape, fortran_order, dtype = npy_format.read_array_header_2_0(member)
    else:
        raise ArchiveError(f"the entry {name!r} is a .npy of unsupported version {version}")
    if dtype.hasobject:
        raise ArchiveError(f"the entry {name!r} holds Python objects (pickles are never loaded)")
    if any(n < 0 for n in shape):
        raise ArchiveError(f"the entry {name!r} declares the negative shape {list(shape)}")
    count = math.prod(shape)
    if count and not dtype.itemsize:
        raise ArchiveError(f"the entry {name!r} declares {count} elements of zero bytes")
    data_size = entry_size - member.tell()
    if count * dtype.itemsize != data_size:
        raise ArchiveError(f"the entry {name!r} declares {dtype.str}{list(shape)} "
                           f"({count * dtype.itemsize} bytes) but holds {data_size} bytes")
    array = _read_data(member, name, dtype, count)
    return array.reshape(shape[::-1]).transpose() if fortran_order else array.reshape(shape)


def _read_data(member, name: str, dtype: np.dtype, count: int) -> np.ndarray:
    array = np.empty(count, dtype)
    view = memoryview(array.view(np.uint8)) if array.nbytes else memoryview(b"")
    done = 0
    while done < len(view):
        n = member.readinto(view[done:done + _CHUNK])
        if not n:
            raise ArchiveError(f"the entry {name!r} ends early")
        done += n
    if member.read(1):  # also makes zipfile check the entry's CRC
        raise ArchiveError(f"the entry {name!r} has bytes after its data")
    return array


# ---------------------------------------------------------------------------------------------
# Temporary files of `save`

_TEMP_MARK = ".funcgrad-tmp-"
_TEMP_TAIL = re.compile(r"([0-9]+)-[a-z0-9_]{8}")  # pid, then mkstemp's 8 random characters


def _temp_start(target: str) -> str:
    return "." + os.path.basename(target) + _TEMP_MARK


def make_temp_file(target: str) -> tuple[int, str]:
    """`(fd, path)` of a new `.{name}.funcgrad-tmp-{pid}-{random}` beside `target`."""
    prefix = f"{_temp_start(target)}{os.getpid()}-"
    return tempfile.mkstemp(prefix=prefix, dir=os.path.dirname(target))


def remove_stale_temp_files(target: str) -> list[str]:
    """Removes the temporary files of saves to `target` whose writer process is dead.

    Best effort: a file that cannot be listed or removed is left. Only on POSIX, where
    `os.kill(pid, 0)` asks whether `pid` lives (on Windows it would send CTRL_C_EVENT).
    Returns the names removed.
    """
    if os.name != "posix":
        return []
    folder, start = os.path.dirname(target), _temp_start(target)
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    removed = []
    for name in names:
        match = _TEMP_TAIL.fullmatch(name[len(start):]) if name.startswith(start) else None
        if match is None or _alive(int(match.group(1))):
            continue
        try:
            os.remove(os.path.join(folder, name))
            removed.append(name)
        except OSError:
            pass
    return removed


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True  # another thread of this process may be saving to the same target
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (OSError, OverflowError, ValueError):  # another user's process, or no such pid form
        return True
    return True
