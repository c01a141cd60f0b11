"""The on-disk cache of compiled C modules: a folder only this user can write, modules
loaded only when they are what funcgrad built there, durable writes, pruning of its own
files alone.

    with cache.open_folder() as folder:   # raises Unusable (path, reason) when untrusted
        lib = folder.load_module(key)     # ctypes.CDLL, or None (absent, or failed a check)

What is trusted and why (docs/internals.md, "native cache: what is trusted and why"): the
folder (`config.native_cache_dir`, else `$XDG_CACHE_HOME/funcgrad/native`) and every file
read from it must be owned by this user and not writable by group or others, as ssh and pip
require of theirs; funcgrad creates the folder (and the folders above it that it creates)
0700 whatever the umask, its files 0600 (modules 0700). A module `<key>.so` loads only when
its sidecar `<key>.sum` (same checks) names the key and the module's size and sha256, and
the bytes match: checked once per load through the descriptor that `dlopen` then opens
(`/proc/self/fd/N`), so what was checked is what runs, and never on the call path. A module
failing a check is not loaded: it is removed and built again, with one warning naming the
path and the reason. Every write is a temporary file, fsync, then rename.

The folders funcgrad makes hold a marker (`CACHEDIR.TAG`, which backup tools also read).
Pruning counts and deletes only names funcgrad makes (`<64 hex>.so/.c/.sum`,
`probe-<24 hex>.json`, its own stale `fgtmp-*` temporaries); in a configured folder without
the marker, only modules whose sidecar proves funcgrad built them.
"""

import atexit
import contextlib
import ctypes
import hashlib
import json
import os
import re
import secrets
import shutil
import stat
import tempfile
import threading
import time
import warnings

from funcgrad.config import config

MARKER = "CACHEDIR.TAG"
MARKER_TEXT = ("Signature: 8a477f597d28d172789f06886806bc55\n"
               "# A cache of C modules compiled by funcgrad's native backend; funcgrad deletes\n"
               "# only the files it names here (<sha256>.so/.c/.sum, probe-*.json, fgtmp-*).\n")
MODULE_NAME = re.compile(r"([0-9a-f]{64})\.(so|c|sum)")
PROBE_NAME = re.compile(r"probe-[0-9a-f]{24}\.json")
TEMP_PREFIX = "fgtmp-"
TEMP_NAME = re.compile(r"fgtmp-[0-9a-f]{16}(\.d|-.*)")
STALE_SECONDS = 3600  # a temporary this old is a crashed build's (a compile times out at 600)
FD_PATHS = os.path.isdir("/proc/self/fd")  # dlopen and the compiler reach files by descriptor
_warned = set()
_lock = threading.Lock()


def _forked():
    global _lock
    _lock = threading.Lock()  # one held by another thread at the fork would stay held


os.register_at_fork(after_in_child=_forked)


class Unusable(Exception):
    """A cache folder or file funcgrad must not use: `path`, `reason`."""

    def __init__(self, path, reason):
        super().__init__(f"{path}: {reason}")
        self.path, self.reason = path, reason


def warn_once(path, message):
    """One RuntimeWarning per path (`message` says what is wrong with it)."""
    with _lock:
        if path in _warned:
            return
        _warned.add(path)
    warnings.warn(f"funcgrad: native cache {path}: {message}", RuntimeWarning, stacklevel=3)


def cache_dir():
    """Where compiled modules are kept (`config.native_cache_dir`, else
    `$XDG_CACHE_HOME/funcgrad/native`, else `~/.cache/funcgrad/native`)."""
    if config.native_cache_dir:
        return os.path.abspath(os.path.expanduser(str(config.native_cache_dir)))
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.abspath(os.path.join(base, "funcgrad", "native"))


def problem(st, what="file"):
    """Why a folder or file with `os.stat` result `st` is not trusted, or None."""
    uid = os.geteuid()
    if st.st_uid != uid:
        return f"the {what} is owned by uid {st.st_uid}, not by this user (uid {uid})"
    if st.st_mode & 0o022:
        who = {0o020: "its group", 0o002: "others", 0o022: "its group and others"}
        return (f"the {what} is writable by {who[st.st_mode & 0o022]} "
                f"(mode {stat.S_IMODE(st.st_mode):04o})")
    if what == "file" and not stat.S_ISREG(st.st_mode):
        return "it is not a regular file"
    return None


def _make_dirs(path):
    """Creates the missing folders of `path`, each 0700 whatever the umask; True when it
    created `path` itself."""
    missing, p = [], path
    while not os.path.lexists(p):
        missing.append(p)
        parent = os.path.dirname(p)
        if parent == p:
            break
        p = parent
    made = False
    for d in reversed(missing):
        try:
            os.mkdir(d, 0o700)
        except FileExistsError:  # another process made it first
            made = False
            continue
        os.chmod(d, 0o700)  # a umask may have taken the owner's bits too
        made = True
    return made


def open_folder(path=None):
    """The cache folder, created if missing and checked (a `Folder`; raises `Unusable`)."""
    path = path or cache_dir()
    default = not config.native_cache_dir
    try:
        made = _make_dirs(path)
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    except OSError as e:
        raise Unusable(path, f"cannot be created or opened ({e.strerror or e})") from None
    try:
        st = os.fstat(fd)
        marked = made or default or _exists(fd, MARKER)
        if marked and st.st_uid == os.geteuid() and stat.S_IMODE(st.st_mode) != 0o700:
            with contextlib.suppress(OSError):  # funcgrad's own folder (an older version's)
                os.fchmod(fd, 0o700)
            st = os.fstat(fd)
        reason = problem(st, "folder")
        if reason:
            raise Unusable(path, reason)
        folder = Folder(path, fd, marked)
        if marked and not _exists(fd, MARKER):
            with contextlib.suppress(OSError):
                folder.write(MARKER, MARKER_TEXT.encode())
        return folder
    except BaseException:
        os.close(fd)
        raise


def _exists(dir_fd, name):
    """Whether `name` is a file of this user's in the folder (a marker someone else put
    there does not count)."""
    try:
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except OSError:
        return False
    return stat.S_ISREG(st.st_mode) and st.st_uid == os.geteuid()


def fd_path(fd):
    """A path naming open descriptor `fd` (for dlopen and the compiler's output)."""
    return f"/proc/self/fd/{fd}"


class Folder:
    """An open, checked cache folder: `path`, descriptor `fd` (every access is relative to
    it), `marked` (funcgrad made it). A context manager closing the descriptor."""

    def __init__(self, path, fd, marked):
        self.path, self.fd, self.marked = path, fd, marked

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    # --- reading ----------------------------------------------------------------------------

    def open_checked(self, name):
        """A read descriptor of file `name` after the ownership checks; None when absent.
        Raises `Unusable` when the file fails them."""
        try:
            fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=self.fd)
        except FileNotFoundError:
            return None
        except OSError as e:
            raise Unusable(self.file(name), f"cannot be opened ({e.strerror})") from None
        reason = problem(os.fstat(fd))
        if reason:
            os.close(fd)
            raise Unusable(self.file(name), reason)
        return fd

    def read_json(self, name, limit=1 << 16):
        """The JSON value of file `name` after the checks; None when it is absent or is no
        JSON. Raises `Unusable` when the file fails a check."""
        fd = self.open_checked(name)
        if fd is None:
            return None
        try:
            with os.fdopen(fd, "rb") as f:
                return json.loads(f.read(limit).decode())
        except (OSError, ValueError):
            return None

    def load_module(self, key):
        """Module `<key>.so`, loaded when it passes every check (see the module docstring);
        None when absent. A module that fails one is removed (after one warning; without
        one when no sidecar goes with it: an older funcgrad's, or no module of funcgrad's)."""
        name = key + ".so"
        try:
            fd = self.open_checked(name)
            if fd is None:
                return None
            try:
                if self._verify(fd, key):
                    try:
                        return ctypes.CDLL(self.loadable(name))
                    except OSError as e:
                        raise Unusable(self.file(name), f"does not load ({e})") from None
            finally:
                os.close(fd)
        except Unusable as e:
            warn_once(e.path, f"{e.reason}; not loaded, it is built again")
        self.remove_module(key)
        return None

    def _verify(self, fd, key):
        """True when the module open as `fd` is the one its sidecar records; False when no
        sidecar of funcgrad's goes with it; raises `Unusable` when they differ."""
        record = self.read_json(key + ".sum")
        if not isinstance(record, dict) or record.get("key") != key:
            return False
        size = os.fstat(fd).st_size
        if record.get("size") != size:
            raise Unusable(self.file(key + ".so"),
                           f"{size} bytes where {record.get('size')} were built (truncated or "
                           "replaced)")
        if record.get("sha256") != digest(fd):
            raise Unusable(self.file(key + ".so"),
                           "its sha256 differs from the one recorded when it was built")
        return True

    # --- writing ----------------------------------------------------------------------------

    def write(self, name, data, mode=0o600, durable=True):
        """File `name` := `data`, atomically (temporary, rename) and, when `durable`, with
        its bytes on disk before the rename (fsync): a crash leaves the old file or the new
        one, never a part."""
        tmp = f"{TEMP_PREFIX}{secrets.token_hex(8)}-{name}"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode,
                     dir_fd=self.fd)
        try:
            try:
                os.fchmod(fd, mode)
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view):]
                if durable:
                    os.fsync(fd)
            finally:
                os.close(fd)
            os.rename(tmp, name, src_dir_fd=self.fd, dst_dir_fd=self.fd)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=self.fd)
            raise

    @contextlib.contextmanager
    def workspace(self):
        """A private temporary folder inside this one: (descriptor, path the compiler
        writes to); removed with everything in it at the end."""
        name = f"{TEMP_PREFIX}{secrets.token_hex(8)}.d"
        os.mkdir(name, 0o700, dir_fd=self.fd)
        try:
            fd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=self.fd)
            try:
                os.fchmod(fd, 0o700)
                yield fd, fd_path(fd) if FD_PATHS else self.file(name)
            finally:
                os.close(fd)
        finally:
            _remove_tree(self.fd, name)

    def publish(self, work_fd, key, source):
        """Moves module `<key>.so` built in workspace `work_fd` into the folder, after its
        sidecar (size, sha256); writes `<key>.c` beside it."""
        fd = os.open(key + ".so", os.O_RDONLY | os.O_NOFOLLOW, dir_fd=work_fd)
        try:
            os.fchmod(fd, 0o700)
            os.fsync(fd)
            record = {"key": key, "size": os.fstat(fd).st_size, "sha256": digest(fd)}
        finally:
            os.close(fd)
        self.write(key + ".sum", json.dumps(record).encode())
        os.rename(key + ".so", key + ".so", src_dir_fd=work_fd, dst_dir_fd=self.fd)
        with contextlib.suppress(OSError):  # the source is for people to read
            self.write(key + ".c", source.encode(), durable=False)

    def remove_module(self, key):
        for suffix in (".so", ".sum", ".c"):
            with contextlib.suppress(OSError):
                os.unlink(key + suffix, dir_fd=self.fd)

    def touch(self, name):
        """Marks `name` recently used (`prune` keeps it longest)."""
        with contextlib.suppress(OSError):
            os.utime(name, dir_fd=self.fd, follow_symlinks=False)

    def file(self, name):
        return os.path.join(self.path, name)

    def loadable(self, name):
        """The path dlopen gets for file `name`: through this folder's descriptor (so the
        folder checked is the one read, whatever happens to the path above it). Never the
        file's own descriptor: glibc takes a path it loaded before for the same library,
        and descriptor numbers are reused; a module's name holds its key."""
        return f"{fd_path(self.fd)}/{name}" if FD_PATHS else self.file(name)

    # --- pruning ----------------------------------------------------------------------------

    def entries(self):
        """{key: {suffix: stat}} of the modules, [(name, stat)] of the other files funcgrad
        names (probe files), [(name, stat)] of temporaries."""
        modules, other, temps = {}, [], []
        for e in os.scandir(self.fd):
            try:
                st = e.stat(follow_symlinks=False)
            except OSError:
                continue
            m = MODULE_NAME.fullmatch(e.name)
            if m and stat.S_ISREG(st.st_mode):
                modules.setdefault(m.group(1), {})[m.group(2)] = st
            elif PROBE_NAME.fullmatch(e.name) and stat.S_ISREG(st.st_mode):
                other.append((e.name, st))
            elif TEMP_NAME.fullmatch(e.name):
                temps.append((e.name, st))
        return modules, other, temps

    def prune(self, limit, keep=None):
        """Deletes the least recently used modules (a disk hit touches its `.so`) until
        funcgrad's files hold at most `limit` bytes; `keep` (a key) stays; temporaries older
        than `STALE_SECONDS` go. Only names funcgrad makes are counted or deleted; in a
        folder without the marker, only modules whose sidecar funcgrad wrote."""
        modules, other, temps = self.entries()
        now = time.time()
        for name, st in temps:
            if now - st.st_mtime > STALE_SECONDS:
                _remove_tree(self.fd, name)
        total = sum(st.st_size for parts in modules.values() for st in parts.values())
        total += sum(st.st_size for _, st in other)
        order = sorted(modules.items(), key=lambda kv: kv[1].get("so", kv[1].get(
            "sum", next(iter(kv[1].values())))).st_mtime)
        for key, parts in order:
            if total <= limit:
                break
            if key == keep or (not self.marked and "sum" not in parts):
                continue
            self.remove_module(key)
            total -= sum(st.st_size for st in parts.values())


def _remove_tree(dir_fd, name):
    """Removes `name` (a file or a folder of files) under `dir_fd`, quietly."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=dir_fd)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(name, dir_fd=dir_fd)
        return
    try:
        for e in os.scandir(fd):
            with contextlib.suppress(OSError):
                os.unlink(e.name, dir_fd=fd)
    finally:
        os.close(fd)
    with contextlib.suppress(OSError):
        os.rmdir(name, dir_fd=dir_fd)


def digest(fd):
    """The sha256 (hex) of the file open as `fd`, read from its start."""
    h, offset = hashlib.sha256(), 0
    while True:
        chunk = os.pread(fd, 1 << 20, offset)
        if not chunk:
            return h.hexdigest()
        h.update(chunk)
        offset += len(chunk)


@contextlib.contextmanager
def private_folder():
    """A fresh folder only this process uses (`tempfile.mkdtemp`, 0700), removed at the
    end (or when the process exits during a build in a daemon thread): where modules are
    built when the cache folder cannot be trusted or written."""
    path = tempfile.mkdtemp(prefix="funcgrad-native-")
    _private.add(path)
    try:
        with Folder(path, os.open(path, os.O_RDONLY | os.O_DIRECTORY), True) as folder:
            yield folder
    finally:
        shutil.rmtree(path, ignore_errors=True)
        _private.discard(path)


_private = set()  # the private folders of builds under way


@atexit.register
def _remove_private():
    for path in list(_private):
        shutil.rmtree(path, ignore_errors=True)


def describe():
    """What `python -m funcgrad doctor` reports: {path, owner, mode, marker, ok (None: not
    made yet), reason, modules, bytes}."""
    path = cache_dir()
    out = {"path": path, "owner": None, "mode": None, "marker": False, "ok": False,
           "reason": None, "modules": 0, "bytes": 0}
    if not os.path.lexists(path):
        out.update(ok=None, reason="not made yet (funcgrad makes it 0700 on first use)")
        return out
    try:
        with open_folder(path) as folder:
            st, (modules, _, _) = os.fstat(folder.fd), folder.entries()
            out.update(marker=_exists(folder.fd, MARKER), ok=True, modules=sum(
                "so" in parts for parts in modules.values()), bytes=sum(
                s.st_size for parts in modules.values() for s in parts.values()))
    except Unusable as e:
        out["reason"] = e.reason
        try:
            st = os.stat(path)
        except OSError:
            return out
    out["owner"], out["mode"] = st.st_uid, stat.S_IMODE(st.st_mode)
    return out
