"""One daemon per SQLite database, and a database this process can write.

``claim_sqlite_database(path)`` runs before anything opens the database (so before migrations, the load and the
Kafka listener):

1. **Writable.** The directory, the database file and its ``-wal`` and ``-shm`` files (when present) must be
   writable by this process. SQLite does not refuse such a database: it opens what it cannot write read-only, serves
   reads, and fails every write ("attempt to write a readonly database") — and a ``-shm`` it can only map
   read-only is the one case the issue reported ending in SIGBUS. So the start fails with a message naming the file.
   The check opens each file for writing (``O_RDWR``) and creates (then removes) a file in the directory instead
   of asking ``access()``: that is what SQLite will do, and it is honest for root too (an immutable file,
   ``chattr +i``, or a read-only mount refuses root as well).
2. **Exclusive.** ``<database>-kgc.lock`` next to the database holds an exclusive ``flock`` for the life of the
   process, and says who holds it (pid, host, start time, the database). A second daemon on the same database fails
   with a message naming the holder. The kernel drops the lock when the holder's process ends however it ends
   (SIGKILL, OOM kill, power loss), so a crashed daemon never blocks its own restart and no stale-lock cleanup is
   needed; the file itself stays, and its content only describes the last holder.

``flock`` locks are per open file description and local to one host: on a network file system (NFS) they may not
be enforced across hosts. The embedded SQLite database is meant for a local disk (SQLite's own locking has the same
limit); PostgreSQL is the multi-host backend (see docs/robustness.md for how it will be owned there).
"""

from __future__ import annotations

import fcntl
import os
import socket
import tempfile
import time
from pathlib import Path

from .errors import StorageError

LOCK_SUFFIX = "-kgc.lock"


class DatabaseInUse(StorageError):
    """Another process holds the database's lock."""


class DatabaseNotWritable(StorageError):
    """The database, one of its side files, or its directory cannot be written by this process."""


class DatabaseLock:
    """An exclusive ``flock`` on ``<database>-kgc.lock``; ``release()`` (or process exit) gives it up."""

    def __init__(self, path: Path, fd: int) -> None:
        self.path = path
        self._fd: int | None = fd

    @property
    def held(self) -> bool:
        return self._fd is not None

    def release(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)  # closing the last descriptor drops the flock


def check_writable(database: Path) -> None:
    """Raise ``DatabaseNotWritable`` naming the first of directory, database, ``-wal``, ``-shm`` that this process
    cannot write."""
    directory = database.parent
    try:  # create a file, as SQLite will (its -wal, -shm and journal files)
        fd, probe = tempfile.mkstemp(prefix=".kgc-write-check-", dir=directory)
    except OSError as e:
        raise DatabaseNotWritable(
            f"cannot create files in the data directory {directory} (SQLite creates its -wal and -shm files "
            f"there): {e.strerror} (owner uid {_owner(directory)}, this process runs as uid {os.geteuid()})"
        ) from e
    os.close(fd)
    os.unlink(probe)
    for path in (database, Path(f"{database}-wal"), Path(f"{database}-shm")):
        try:
            fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC)
        except FileNotFoundError:
            continue  # created by SQLite in the (writable) directory
        except OSError as e:
            raise DatabaseNotWritable(
                f"cannot open {path} for writing: {e.strerror} (owner uid {_owner(path)}, this process runs as uid "
                f"{os.geteuid()}); SQLite would open it read-only and fail every write"
            ) from e
        os.close(fd)


def lock_database(database: Path) -> DatabaseLock:
    """Take the exclusive lock of ``database`` or raise ``DatabaseInUse`` naming the holder."""
    path = Path(f"{database}{LOCK_SUFFIX}")
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    except OSError as e:
        raise DatabaseNotWritable(f"cannot open the lock file {path}: {e.strerror}") from e
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = _read_holder(fd)
        os.close(fd)
        raise DatabaseInUse(
            f"the database {database} is in use by another coordinator ({holder}; lock file {path}): "
            "stop it first, or give this one its own --data-dir"
        ) from None
    except OSError as e:
        os.close(fd)
        raise DatabaseNotWritable(f"cannot lock {path}: {e.strerror}") from e
    started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    owner = f"pid {os.getpid()} on host {socket.gethostname()}, started {started}, database {database}\n"
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, owner.encode(), 0)
    except OSError:
        pass  # the lock is what counts; the text is a courtesy to whoever is refused
    return DatabaseLock(path, fd)


def claim_sqlite_database(database: str | Path) -> DatabaseLock:
    """``check_writable`` then ``lock_database``: what an embedded SQLite database needs before it is opened."""
    path = Path(database).resolve()
    path.parent.mkdir(parents=True, exist_ok=True)
    check_writable(path)
    return lock_database(path)


def _read_holder(fd: int) -> str:
    try:
        text = os.pread(fd, 1024, 0).decode(errors="replace").strip()
    except OSError:
        text = ""
    return text.split(", database ")[0] if text else "holder unknown"


def _owner(path: Path) -> str:
    try:
        return str(path.stat().st_uid)
    except OSError:
        return "?"
