"""Run directories: create, lock against a second process, archive on ``--new``, find the checkpoint to resume from."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import socket
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from speedflip.checkpoint import CheckpointError, list_checkpoints, verify_checkpoint

if sys.platform != "win32":
    import fcntl


class RunDirError(RuntimeError):
    """A run directory that cannot be used; the message says why and what to do."""


@dataclass
class ResumePlan:
    """Where a run starts: the checkpoint to load (None = fresh), the checkpoints skipped and why, the
    folder an old run was moved to (``--new``), and notes on leftovers of interrupted saves."""

    checkpoint: Path | None
    skipped: list[str] = field(default_factory=list)
    archived_to: Path | None = None
    leftovers: list[str] = field(default_factory=list)


_TMP_NAME = re.compile(r"^\.tmp-(\d+)-(\d+)$")

LOCK_NAME = ".lock"
"""The lock file at the root of a run directory (see :func:`lock_run_dir`); not part of the run."""


def _pid_alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # exists, owned by someone else
        return True
    return True


def interrupted_saves(checkpoints_dir: Path) -> list[str]:
    """Notes on ``.tmp-<step>-<pid>`` folders left by saves whose process is gone (killed mid-save).

    They were never renamed into place, so they are not checkpoints and are never loaded. They are
    left where they are (nothing in a run directory is deleted behind the user's back); the note says
    they are safe to delete. A folder whose process still runs is a save in progress and not reported.
    """
    notes: list[str] = []
    if not checkpoints_dir.is_dir():
        return notes
    for entry in sorted(checkpoints_dir.iterdir()):
        match = _TMP_NAME.match(entry.name)
        if match is None or not entry.is_dir() or _pid_alive(int(match.group(2))):
            continue
        notes.append(
            f"'{entry}' is the unfinished save of step {match.group(1)} by process {match.group(2)}, which "
            "stopped mid-save; it was never a checkpoint, is ignored and can be deleted"
        )
    return notes


def compat_signature(
    obs_dim: int,
    num_actions: int,
    policy_layers: list[int],
    critic_layers: list[int],
    action_form: str = "table",
    recurrent: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """What must match for a checkpoint to load into a model (``recurrent``: the LSTM/GRU core of a
    recurrent policy, see :func:`speedflip.models.build.recurrent_spec`; absent for feed-forward ones)."""
    signature: dict[str, Any] = {
        "obs_dim": obs_dim,
        "num_actions": num_actions,
        "policy_layers": list(policy_layers),
        "critic_layers": list(critic_layers),
        "action_form": action_form,
    }
    if recurrent is not None:
        signature["recurrent"] = dict(recurrent)
    return signature


def _ensure_writable(folder: Path, what: str = "run directory") -> None:
    if folder.exists() and not folder.is_dir():
        raise RunDirError(f"{what} '{folder}' is a file, not a folder. Choose another path with --run-dir.")
    try:
        folder.mkdir(parents=True, exist_ok=True)
        probe = folder / f".write-test-{os.getpid()}-{time.time_ns()}"
        probe.write_text("ok")
        probe.unlink()
    except OSError as err:
        raise RunDirError(
            f"{what} '{folder}' is not writable ({err.strerror or err}); nothing was started. Choose another "
            "with --run-dir, or fix its permissions / free space / remount it read-write."
        ) from None


def prepare_run_dir(run_dir: Path, compat: dict[str, Any], new: bool) -> ResumePlan:
    """Decide how to start in ``run_dir``: fresh, or resumed from its newest usable checkpoint.

    Nothing is deleted: ``--new`` moves an existing run aside to ``<run_dir>-archived-<time>`` (all
    but the lock file of :func:`lock_run_dir`, which stays, still held, in the fresh ``run_dir``; a
    folder holding nothing but that file counts as empty).
    A run directory whose checkpoints are all unusable, or built for another network, is an error
    (starting over silently would mix two runs' metrics and lose the user's checkpoints).
    """
    archived = None
    run_dir = run_dir.resolve()
    if run_dir.exists() and not run_dir.is_dir():
        raise RunDirError(f"run directory '{run_dir}' is a file, not a folder. Choose another path with --run-dir.")
    if new and run_dir.exists() and any(p.name != LOCK_NAME for p in run_dir.iterdir()):
        archived = run_dir.with_name(f"{run_dir.name}-archived-{time.strftime('%Y%m%d-%H%M%S')}")
        try:
            run_dir.rename(archived)
        except OSError as err:
            raise RunDirError(f"cannot move the old run '{run_dir}' aside for --new: {err}") from None
    _ensure_writable(run_dir)
    if archived is not None:
        _keep_lock_file(archived, run_dir)
    _ensure_writable(run_dir / "checkpoints", "checkpoint folder")
    leftovers = interrupted_saves(run_dir / "checkpoints")
    found = list_checkpoints(run_dir / "checkpoints")
    if not found:
        return ResumePlan(None, archived_to=archived, leftovers=leftovers)
    skipped: list[str] = []
    mismatches: list[str] = []
    for path in found:
        try:
            meta = verify_checkpoint(path)
        except CheckpointError as err:
            skipped.append(str(err))
            continue
        theirs = meta.get("compat", {})
        diff = [f"{k}: checkpoint {theirs.get(k)!r} vs config {v!r}" for k, v in compat.items() if theirs.get(k) != v]
        if diff:
            mismatches.append(f"{path.name} ({'; '.join(diff)})")
            skipped.append(f"{path}: incompatible with the current config ({'; '.join(diff)})")
            continue
        return ResumePlan(path, skipped, archived, leftovers)
    if mismatches:
        raise RunDirError(
            f"run directory '{run_dir}' holds checkpoints of a different setup: {', '.join(mismatches)}. "
            "Use the config that run was started with (it is saved as config.yaml there), start a "
            "fresh run with --new (the old one is kept, moved aside), or pick another --run-dir."
        )
    raise RunDirError(
        f"run directory '{run_dir}' has checkpoints but none can be loaded: {' | '.join(skipped)}. "
        "They were left untouched. Start a fresh run with --new (the old one is moved aside) or pick "
        "another --run-dir."
    )


# ---------------------------------------------------------------------- one process per run directory
_LOCK_READ_WAIT = 1.0  # s: how long a refused process waits for the holder to finish writing its details


def _keep_lock_file(archived: Path, run_dir: Path) -> None:
    """Move ``.lock`` from a run just moved aside (``--new``) back into the fresh ``run_dir``.

    The process archiving holds that lock (see :func:`lock_run_dir`); ``flock`` belongs to the file, not
    its name, so moving the file back keeps it held and keeps ``run_dir`` locked for the new run. The
    archived run keeps no lock file (nothing runs there any more). The move never replaces a lock file:
    one already in the fresh ``run_dir`` was made by another process that started there while the old
    run was being moved, and that process keeps the folder.
    """
    source, target = archived / LOCK_NAME, run_dir / LOCK_NAME
    if not source.exists():
        return
    try:
        os.link(source, target)  # fails if target exists, unlike a rename
    except FileExistsError:
        raise RunDirError(
            f"another speedflip process started in '{run_dir}' while --new moved the old run aside to "
            f"'{archived}'; nothing was started here. Stop that one first, or pick another --run-dir."
        ) from None
    except OSError:  # a file system without hard links
        os.replace(source, target)
        return
    source.unlink()


def _own_cmdline() -> str:
    try:
        raw = Path("/proc/self/cmdline").read_bytes()
    except OSError:
        return shlex.join([sys.executable, *sys.argv])
    return shlex.join(arg.decode(errors="replace") for arg in raw.split(b"\0") if arg)


def _proc_cmdline(pid: int) -> str:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return ""
    return shlex.join(arg.decode(errors="replace") for arg in raw.split(b"\0") if arg)


def _read_holder(path: Path) -> dict[str, Any]:
    """The details the lock holder wrote (``{}`` if unreadable).

    The holder writes them right after it takes the lock, so a refused process may look in between (an
    empty file, or the details of an earlier holder that is gone): it rereads for up to a second.
    """
    here = socket.gethostname()
    deadline = time.monotonic() + _LOCK_READ_WAIT
    holder: dict[str, Any] = {}
    while True:
        try:
            loaded = json.loads(path.read_text(encoding="utf-8"))
            holder = loaded if isinstance(loaded, dict) else {}
        except (OSError, ValueError):
            holder = {}
        pid = holder.get("pid")
        settled = isinstance(pid, int) and (holder.get("host") != here or _pid_alive(pid))
        if settled or time.monotonic() >= deadline:
            return holder
        time.sleep(0.02)


def _describe_holder(path: Path) -> str:
    holder = _read_holder(path)
    pid = holder.get("pid")
    if not isinstance(pid, int):
        return "a process that did not record itself"
    host = holder.get("host") or "an unknown host"
    text = f"pid {pid} on host {host}"
    if holder.get("started"):
        text += f", started {holder['started']}"
    cmdline = str(holder.get("cmdline") or "").replace("\n", "\\n")
    if not cmdline and host == socket.gethostname():
        cmdline = _proc_cmdline(pid)
    if cmdline:
        text += f": {cmdline if len(cmdline) <= 300 else cmdline[:297] + '...'}"
    if host == socket.gethostname() and not _pid_alive(pid):
        text += "; that process has exited, so a child process it started still holds the lock"
    return text


@contextlib.contextmanager
def lock_run_dir(run_dir: Path) -> Iterator[None]:
    """Hold ``run_dir`` for this process: a second speedflip process on it is refused at once.

    Takes ``flock(LOCK_EX | LOCK_NB)`` on ``run_dir/.lock`` (creating ``run_dir`` if needed) and writes
    this process's pid, host, start time and command line into the file. If another process holds it,
    raises :class:`RunDirError` naming that process. The kernel drops the lock when its holder exits,
    however it exits (``kill -9``, power loss), so a lock file left behind never blocks a resume: only a
    live holder does. The holder removes the file when it leaves (a failed start leaves the run
    directory as it was); a process that locked a file just removed by its holder sees that the path no
    longer names its file and tries again, so two processes never both hold the run directory.

    The lock is per open of the file, so a second ``lock_run_dir`` on the same folder inside the same
    process is refused too; entering it again after leaving is fine. Child processes started with
    ``fork`` (not exec'd) share the lock and keep it while they live; ``forkserver``/``spawn`` children
    do not. ``--new`` (:func:`prepare_run_dir`) moves the lock file back into the fresh run directory,
    so the lock stays held across the archiving. On network file systems the lock is as good as their
    ``flock`` support (NFSv4 on Linux emulates it with byte-range locks).

    On platforms without ``fcntl`` (Windows) this does nothing: no lock is taken and two processes on
    one run directory are not detected.
    """
    if sys.platform == "win32":
        yield
        return
    run_dir = run_dir.resolve()
    _ensure_writable(run_dir)
    path = run_dir / LOCK_NAME
    fd = _acquire(path, run_dir)
    try:
        details = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "started": time.strftime("%Y-%m-%d %H:%M:%S %z"),
            "cmdline": _own_cmdline(),
        }
        data = (json.dumps(details) + "\n").encode()
        with contextlib.suppress(OSError):  # the details only make a refusal clearer; the lock holds regardless
            os.ftruncate(fd, 0)
            os.pwrite(fd, data, 0)
        yield
    finally:
        with contextlib.suppress(OSError):  # --new may have moved it; remove it only if it is still ours
            if _same_file(fd, path):
                path.unlink()
        os.close(fd)  # releases the lock


def _same_file(fd: int, path: Path) -> bool:
    """Whether ``path`` still names the file open as ``fd``."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return False
    own = os.fstat(fd)
    return (st.st_dev, st.st_ino) == (own.st_dev, own.st_ino)


def _acquire(path: Path, run_dir: Path) -> int:
    """Open and lock ``path``; retried when the holder removed the file between our open and our lock."""
    for _ in range(100):
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as err:
            raise RunDirError(
                f"cannot open the lock file '{path}' ({err.strerror or err}); nothing was started. Fix its "
                "permissions or choose another --run-dir."
            ) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise RunDirError(
                f"run directory '{run_dir}' is in use by another speedflip process ({_describe_holder(path)}). "
                "Stop that one first, or pick another --run-dir."
            ) from None
        except OSError as err:  # e.g. a file system without locks
            os.close(fd)
            raise RunDirError(
                f"cannot lock the run directory '{run_dir}' ({err.strerror or err}); nothing was started. "
                "Choose a --run-dir on a local disk."
            ) from None
        if _same_file(fd, path):
            return fd
        os.close(fd)  # locked a file its holder had just removed: take the one the path names now
    raise RunDirError(f"could not lock the run directory '{run_dir}' (its lock file keeps changing)")
