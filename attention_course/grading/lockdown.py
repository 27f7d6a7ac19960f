"""The last step of a sandbox's set-up, before anything of the submission runs: the standard library only.

bubblewrap sets a sandbox up as uid 0 of its user namespace, with every capability inside it (see
``sandbox.bwrap_command``), because when the grader runs as root that identity is the host's root: the
one that reaches the folders it binds (a Python installed below /root, say). No code of a submission
may ever run so, so this step, still privileged inside the sandbox:

- remounts every device node bound into the sandbox (bubblewrap's ``--dev`` binds the host's /dev/null,
  /dev/full, ... as writable mounts of the host's inodes) read-only: they still read and write as
  devices, but chmod, chown and utime on them fail, whoever the sandbox maps to;
- sets the user namespace's limit of nested user namespaces to 0 (nobody in the sandbox may make one);
- gives /tmp and /dev/shm to the run's uid, switches to it (65534, the host's nobody, when the grader is
  root; 0 otherwise, which is then the grader's own uid outside) and drops every capability for good:
  bounding set emptied and secure bits locked, so that uid 0 of the namespace gives none back.

A cold run runs it as ``python -I -S -c SOURCE UID GID -- COMMAND...``, which ends by executing COMMAND;
a warm template (forkserver.py) loads it from its spool and calls its functions for each run.
"""

from __future__ import annotations

import ctypes
import os
import re
import stat
import sys
import traceback

CLONE_NEWNS = 0x20000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT, MS_NOATIME, MS_NODIRATIME, MS_BIND = 1, 2, 4, 8, 32, 1024, 2048, 4096
MS_REC, MS_PRIVATE, MS_RELATIME, MS_STRICTATIME = 16384, 1 << 18, 1 << 21, 1 << 24
# statvfs's flags of a mount, and the mount flag that keeps each when the mount is remounted.
KEPT_FLAGS = ((os.ST_NOSUID, MS_NOSUID), (os.ST_NODEV, MS_NODEV), (os.ST_NOEXEC, MS_NOEXEC),
              (os.ST_NOATIME, MS_NOATIME), (os.ST_NODIRATIME, MS_NODIRATIME), (os.ST_RELATIME, MS_RELATIME))
PR_CAPBSET_DROP, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, PR_SET_SECUREBITS = 24, 47, 4, 28
# SECBIT_NOROOT, SECBIT_NO_SETUID_FIXUP, SECBIT_NO_CAP_AMBIENT_RAISE, each with its lock, and KEEP_CAPS locked off.
SECURE_NOROOT_LOCKED = 0b1110_1111
SECBIT_NO_SETUID_FIXUP = 0b100  # (alone: a change of uid keeps the capabilities)
SETUP_FAILED = 126  # the exit status of a set-up that failed (the grader's fault, never the submission's)

libc = ctypes.CDLL(None, use_errno=True)
libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
libc.unshare.argtypes = [ctypes.c_int]
libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]


def check(result: int, what: str) -> None:
    if result != 0:
        number = ctypes.get_errno()
        raise OSError(number, f"{what}: {os.strerror(number)}")


def mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    encode = lambda text: text.encode() if text is not None else None  # noqa: E731
    check(libc.mount(encode(source), encode(target), encode(fstype), flags, encode(data)), f"mount {target}")


def prctl(option: int, value: int = 0, what: str = "prctl") -> None:
    check(libc.prctl(option, value, 0, 0, 0), what)


def mount_points() -> list[str]:
    """Every mount point of this mount namespace, from /proc/self/mountinfo (octal escapes decoded)."""
    with open("/proc/self/mountinfo", encoding="utf-8", errors="surrogateescape") as table:
        return [re.sub(r"\\([0-7]{3})", lambda code: chr(int(code[1], 8)), line.split()[4]) for line in table]


def device_nodes() -> list[str]:
    """The device nodes bound into this sandbox: the mount points that are character or block devices."""
    nodes = []
    for point in mount_points():
        try:
            mode = os.stat(point).st_mode
        except OSError:
            continue
        if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
            nodes.append(point)
    return sorted(set(nodes))


def read_only_devices() -> None:
    """Each bound device node read-only (its other mount flags kept): a device on a read-only mount still
    reads and writes, but its inode (the host's) can be neither chmod-ed, chown-ed nor touched."""
    for node in device_nodes():
        present = os.statvfs(node).f_flag
        if present & os.ST_RDONLY:
            continue
        flags = MS_BIND | MS_REMOUNT | MS_RDONLY
        for kept, flag in KEPT_FLAGS:
            if present & kept:
                flags |= flag
        if not present & (os.ST_NOATIME | os.ST_RELATIME):
            flags |= MS_STRICTATIME
        mount(None, node, None, flags)


def forbid_user_namespaces() -> None:
    """No process of this user namespace may make another: its limit of user namespaces is set to 0,
    through a /proc of our own in a throwaway child (the sandbox's /proc/sys may be read-only)."""
    pid = os.fork()
    if pid == 0:
        try:
            check(libc.unshare(CLONE_NEWNS), "unshare")
            mount(None, "/", None, MS_REC | MS_PRIVATE)
            mount("proc", "/tmp", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
            with open("/tmp/sys/user/max_user_namespaces", "w") as limit:
                limit.write("0")
        except BaseException:
            traceback.print_exc()
            os._exit(1)
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    if status != 0:
        raise OSError("could not forbid user namespaces")


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def become(uid: int, gid: int) -> None:
    """Switch to ``uid``/``gid`` (if not already) and keep every capability, for the rest of a set-up. (A change
    of uid clears the parent-death signal: whoever relies on one sets it again.)"""
    if os.getresuid() == (uid, uid, uid) and os.getresgid() == (gid, gid, gid):
        return
    prctl(PR_SET_SECUREBITS, SECBIT_NO_SETUID_FIXUP, "keep the capabilities across a change of uid")
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)


def drop_privileges(uid: int, gid: int) -> None:
    """Become ``uid``/``gid`` (if not already) with no capability in any set, for good: the bounding set is
    empty and the secure bits are locked, so that being uid 0 of this namespace gives none back, not even
    through a program it runs. (The supplementary groups were emptied before the sandbox started.)"""
    prctl(PR_SET_SECUREBITS, SECURE_NOROOT_LOCKED, "lock the secure bits")
    with open("/proc/sys/kernel/cap_last_cap") as last:
        last_capability = int(last.read())
    for capability in range(last_capability + 1):
        prctl(PR_CAPBSET_DROP, capability, "drop a bounding capability")
    prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, "clear ambient capabilities")
    if os.getresgid() != (gid, gid, gid):
        os.setresgid(gid, gid, gid)
    if os.getresuid() != (uid, uid, uid):  # (SECBIT_NO_SETUID_FIXUP: the capabilities go below, not here)
        os.setresuid(uid, uid, uid)
    header, data = _CapHeader(0x20080522, 0), (_CapData * 2)()  # _LINUX_CAPABILITY_VERSION_3
    check(libc.capset(ctypes.byref(header), data), "capset")


def give(folders: tuple[str, ...], uid: int, gid: int) -> None:
    """The run's own writable folders (fresh tmpfs mounts made by the set-up) belong to the run's uid."""
    for folder in folders:
        if os.path.isdir(folder):
            os.chown(folder, uid, gid)


def main(argv: list[str]) -> None:
    """``UID GID -- COMMAND...``: lock a cold sandbox down, then execute COMMAND as UID."""
    try:
        uid, gid, separator, *command = argv
        if separator != "--" or not command:
            raise ValueError(f"usage: UID GID -- COMMAND...: {argv}")
        uid, gid = int(uid), int(gid)
        read_only_devices()
        forbid_user_namespaces()
        give(("/tmp", "/dev/shm"), uid, gid)
        drop_privileges(uid, gid)
        os.execv(command[0], command)
    except BaseException:
        traceback.print_exc()
        sys.stderr.write("the sandbox's set-up failed\n")
        sys.stderr.flush()
        os._exit(SETUP_FAILED)


if __name__ == "__main__":
    main(sys.argv[1:])
