"""One writer per run directory: `RunLock`, an exclusive flock on run.lock (the kernel lets
go when the process dies, so a dead writer's lock is taken over at once); a second writer
is refused, naming the holder (`RunLocked`). Forked workers close their copy.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import platform
import sys
from pathlib import Path

from sim.model.scenario_set import ScenarioError
from sim.runs.files import LOCK, NOFOLLOW, is_disk_error
from sim.runs.manifest import utc_now

try:  # not on Windows: one writer is then not enforced
    import fcntl
except ImportError:  # pragma: no cover
    fcntl = None  # type: ignore[assignment]

MAX_LOCK_BYTES = 64_000


class RunLocked(ScenarioError):
    """Another live process writes this run directory."""


_HELD: dict[int, int] = {}  # fd -> pid that took the lock: forked children close their copy


def _close_inherited() -> None:
    """In a forked child (a pool worker): close the lock's file descriptors, so that only
    the process that took the lock holds it (the workers write nothing)."""
    for fd in list(_HELD):
        with contextlib.suppress(OSError):
            os.close(fd)
    _HELD.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_close_inherited)


class RunLock:
    """An exclusive lock on `RUN_DIR/run.lock` held by this process, with its pid, host,
    start time and command written in the file for whoever is refused."""

    def __init__(self, run_dir: Path):
        self.path = run_dir / LOCK
        self.fd = -1

    def acquire(self, where: str) -> None:
        if fcntl is None:  # pragma: no cover
            return
        for _ in range(20):
            try:
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | NOFOLLOW, 0o644)
            except OSError as exc:
                if exc.errno == errno.ELOOP or self.path.is_symlink():
                    raise ScenarioError(
                        str(self.path), "", "a symbolic link, not the run's lock file: trainsim "
                        "never writes through a link (it could point at another run's files); "
                        "delete it, then run the command again",
                    ) from None  # fmt: skip
                if is_disk_error(exc) and exc.errno == errno.EROFS:
                    raise ScenarioError(
                        where, str(self.path.parent), f"cannot write there ({exc.strerror})"
                    ) from None
                raise
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = self._holder(fd)
                os.close(fd)
                raise RunLocked(
                    where,
                    str(self.path.parent),
                    f"another trainsim process is writing this run directory: it holds the "
                    f"lock {self.path} ({holder}); one process at a time: wait for it to end, "
                    "or stop it and resume then",
                ) from None
            except OSError as exc:  # a file system without locks: the pid in the file says
                if exc.errno not in (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL):
                    os.close(fd)
                    raise
                self._check_pid(fd, where)
            try:  # the file we locked must still be the lock (not one a leaver unlinked)
                same = os.path.samestat(os.fstat(fd), os.stat(self.path))
            except FileNotFoundError:
                same = False
            if not same:
                os.close(fd)
                continue
            holder = {
                "pid": os.getpid(),
                "host": platform.node(),
                "since": utc_now(),
                "command": " ".join(sys.argv)[:500],
            }
            with contextlib.suppress(OSError):  # the lock holds without its words
                os.ftruncate(fd, 0)
                os.pwrite(fd, (json.dumps(holder) + "\n").encode(), 0)
            self.fd = fd
            _HELD[fd] = os.getpid()
            return
        raise RunLocked(where, str(self.path.parent), "the run's lock file keeps changing")

    @staticmethod
    def _holder(fd: int) -> str:
        try:
            info = json.loads(os.pread(fd, MAX_LOCK_BYTES, 0) or b"{}")
            return (
                f"pid {info.get('pid')} on {info.get('host')}, since {info.get('since')}: "
                f"{str(info.get('command', ''))[:200]}"
            )
        except (OSError, ValueError, AttributeError):
            return "it is just starting"

    def _check_pid(self, fd: int, where: str) -> None:
        """Without flock: refuse when the file names a live process of this host."""
        try:
            info = json.loads(os.pread(fd, MAX_LOCK_BYTES, 0) or b"{}")
            pid, host = int(info["pid"]), info["host"]
        except (OSError, ValueError, KeyError, TypeError):
            return
        if pid == os.getpid():
            return
        alive = host != platform.node()
        if host == platform.node():
            try:
                os.kill(pid, 0)
                alive = True
            except ProcessLookupError:
                alive = False
            except PermissionError:
                alive = True
        if alive:
            os.close(fd)
            raise RunLocked(
                where,
                str(self.path.parent),
                f"another trainsim process is writing this run directory: it holds the lock "
                f"{self.path} ({self._holder(fd)}); if it is gone, delete {self.path} and resume",
            )

    def release(self) -> None:
        if self.fd < 0:
            return
        with contextlib.suppress(OSError):  # unlink while held: nobody locks a stale inode
            if os.path.samestat(os.fstat(self.fd), os.stat(self.path)):
                os.unlink(self.path)
        with contextlib.suppress(OSError):
            os.close(self.fd)
        _HELD.pop(self.fd, None)
        self.fd = -1

    @property
    def held(self) -> bool:
        return self.fd >= 0
