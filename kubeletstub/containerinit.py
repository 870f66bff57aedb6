"""Turn this process into a container, then exec its command: kubelab's stand-in for runc's init.

Run as ``python -m kubeletstub.containerinit SPEC ERRFD`` by `kubeletstub.runtime` (never a shell). SPEC
is a JSON file the runtime wrote (0600): argv, environment, working directory, the pod's network
namespace, the pod sandbox's UTS namespace, and the mounts. In this order the process

1. asks to be SIGKILLed when its parent (the kubelet's runtime) dies, and checks it has not already;
2. joins the pod's network namespace and the sandbox's UTS namespace (its hostname);
3. unshares a mount namespace of its own, private all the way down, so that nothing it mounts
   propagates to the host; then bind-mounts the volumes, /etc/hosts, /etc/hostname, /etc/resolv.conf
   and the termination-message file at their paths (read-only where asked);
4. chdirs into workingDir and execs argv with exactly the given environment (PATH lookup in it), as
   PID 1 of a PID namespace of its own (`_exec`).

Paths that do not exist on the host are never created there: the nearest existing ancestor is replaced,
inside this mount namespace only, by a tmpfs that mirrors it (every entry bind-mounted back in place)
and the missing directories are made in that tmpfs; an ancestor that is ``/`` itself is handled the same
way in a new root that the process then chroots into (`nsenter --root` follows it for exec). What a
container sees is the host's filesystem, with its own files laid over it.

Any failure before exec is written to ERRFD (closed on exec, so the runtime reads EOF on success) and the
process exits 128, which the runtime reports as containerd does: terminated, reason StartError.

``python -m kubeletstub.containerinit --sandbox HOSTNAME PARENT_PID`` is the pod sandbox (kubelet's pause
container) on a node without util-linux's setpriv and unshare (`sandbox.py` has the usual one, which
starts no Python): a UTS namespace with the pod's hostname, held by ``sleep infinity`` exec'd into it (a
megabyte), which every container of the pod joins. Standard library only; imports nothing of kubelab.
"""

from __future__ import annotations

import ctypes
import fcntl
import json
import os
import shutil
import signal
import stat
import sys
import termios
from collections.abc import Mapping, Sequence
from typing import Any

CLONE_NEWNS = 0x00020000
CLONE_NEWUTS = 0x04000000
CLONE_NEWNET = 0x40000000
MS_RDONLY = 1
MS_NOSUID = 2
MS_NODEV = 4
MS_REMOUNT = 32
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18
MNT_DETACH = 2
PR_SET_PDEATHSIG = 1
START_ERROR_EXIT = 128

_libc = ctypes.CDLL(None, use_errno=True)


class SetupError(RuntimeError):
    """The container could not be set up; the message goes to the runtime."""


def _check(result: int, what: str) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise SetupError(f"{what}: {os.strerror(err)}")


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    _check(_libc.mount(source.encode() if source else None, target.encode(),
                       fstype.encode() if fstype else None, ctypes.c_ulong(flags),
                       data.encode() if data else None), f"mount {source or fstype} on {target}")


def _setns(path: str, nstype: int) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        _check(_libc.setns(fd, nstype), f"setns {path}")
    finally:
        os.close(fd)


def die_with_parent(parent_pid: int) -> None:
    _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent_pid:
        os._exit(START_ERROR_EXIT)


def _mirror(directory: str, stage: str) -> None:
    """Lay a tmpfs over `directory` holding the same entries (each bind-mounted back from a staged copy of
    the directory), so new entries can be made in it without touching the filesystem below. The stage is
    reached through a descriptor: it may itself lie under `directory` (the lab's files under /tmp), and
    the tmpfs hides its path."""
    info = os.stat(directory)
    os.makedirs(stage, exist_ok=True)
    _mount(directory, stage, None, MS_BIND | MS_REC)
    fd = os.open(stage, os.O_RDONLY | os.O_DIRECTORY)
    try:
        staged = f"/proc/self/fd/{fd}"
        _mount("tmpfs", directory, "tmpfs", MS_NOSUID | MS_NODEV, f"mode={stat.S_IMODE(info.st_mode):o}")
        os.chown(directory, info.st_uid, info.st_gid)
        for entry in os.scandir(staged):
            src, dst = os.path.join(staged, entry.name), os.path.join(directory, entry.name)
            if entry.is_symlink():
                os.symlink(os.readlink(src), dst)
                continue
            if entry.is_dir(follow_symlinks=False):
                os.mkdir(dst)
            else:
                os.close(os.open(dst, os.O_CREAT | os.O_WRONLY, 0o600))
            _mount(src, dst, None, MS_BIND | MS_REC)
        _libc.umount2(staged.encode(), MNT_DETACH)  # best effort: where it is hidden it does no harm
    finally:
        os.close(fd)


def _new_root(scratch: str) -> None:
    """chroot into a tmpfs that mirrors `/`, so directories can be made at the top level."""
    root = os.path.join(scratch, "root")
    os.makedirs(root, exist_ok=True)
    _mount("tmpfs", root, "tmpfs", MS_NOSUID, "mode=755")
    for name in os.listdir("/"):
        src, dst = "/" + name, os.path.join(root, name)
        if os.path.islink(src):
            os.symlink(os.readlink(src), dst)
            continue
        if os.path.isdir(src):
            os.mkdir(dst)
        else:
            os.close(os.open(dst, os.O_CREAT | os.O_WRONLY, 0o600))
        _mount(src, dst, None, MS_BIND | MS_REC)
    os.chroot(root)
    os.chdir("/")


class _Layout:
    """Makes mount targets exist inside this mount namespace only."""

    def __init__(self, scratch: str) -> None:
        self.scratch = scratch
        self.stages = 0
        self.writable: set[str] = set()  # directories on a tmpfs of ours: entries can be made in them

    def ensure(self, path: str, *, directory: bool) -> None:
        path = os.path.normpath(path)
        if os.path.lexists(path):
            return
        parent = os.path.dirname(path)
        if not os.path.exists(parent):
            self.ensure(parent, directory=True)
        if parent not in self.writable:
            if parent == "/":
                # The scratch directory is found again after the chroot, at the same path, through the
                # root's mirror.
                _new_root(self.scratch)
            else:
                self.stages += 1
                _mirror(parent, os.path.join(self.scratch, f"stage{self.stages}"))
            self.writable.add(parent)
        if directory:
            os.mkdir(path, 0o755)
            self.writable.add(path)
        else:
            os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o644))


def mount_all(mounts: Sequence[Mapping[str, Any]], scratch: str) -> None:
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    layout = _Layout(scratch)
    for m in mounts:
        source, target = str(m["source"]), str(m["target"])
        is_dir = os.path.isdir(source) if m.get("kind", "bind") == "bind" else True
        layout.ensure(target, directory=is_dir)
        if m.get("kind") == "tmpfs":
            _mount("tmpfs", target, "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777")
        else:
            _mount(source, target, None, MS_BIND | MS_REC)
        if m.get("readOnly"):
            _mount(None, target, None, MS_BIND | MS_REMOUNT | MS_RDONLY)


def enter(spec: Mapping[str, Any]) -> None:
    """Everything up to exec (steps 1-3 of the module docstring)."""
    die_with_parent(int(spec["parentPid"]))
    if spec.get("tty"):
        # The terminal on fd 0 becomes this session's controlling terminal (the runtime started us in a
        # session of our own), so ^C and job control reach the command as on a real terminal.
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)
    if spec.get("netns"):
        _setns(str(spec["netns"]), CLONE_NEWNET)
    if spec.get("uts"):
        _setns(str(spec["uts"]), CLONE_NEWUTS)
    if spec.get("mountNamespace"):
        _check(_libc.unshare(CLONE_NEWNS), "unshare mount namespace")
        mount_all(spec.get("mounts") or [], str(spec["scratch"]))
    working_dir = spec.get("workingDir")
    if working_dir:
        try:
            os.chdir(working_dir)
        except OSError as exc:
            raise SetupError(f"chdir to cwd (\"{working_dir}\") set in config.json failed: {exc.strerror}") from exc


def _resolve(command: str, env: Mapping[str, str]) -> None:
    """Fail here, as a StartError, when the command cannot be exec'd (runc's check before it starts)."""
    if "/" in command:
        found = command if os.path.isfile(command) else None
    else:
        found = shutil.which(command, mode=os.F_OK, path=env.get("PATH", ""))
    if found is None:
        raise SetupError(f'exec: "{command}": executable file not found in $PATH')
    if not os.access(found, os.X_OK) or os.path.isdir(found):
        raise SetupError(f'exec: "{command}": permission denied')


def _exec(argv: Sequence[str], env: Mapping[str, str], *, pid_namespace: bool = False) -> None:
    # Python ignores SIGPIPE and SIGXFSZ, and an ignored signal stays ignored across exec: a container's
    # `yes | head` would print "Broken pipe" instead of dying quietly, as it does under runc.
    for signum in (signal.SIGPIPE, signal.SIGXFSZ):
        signal.signal(signum, signal.SIG_DFL)
    _resolve(argv[0], env)
    if pid_namespace:
        # A PID namespace of its own, with its own /proc: the command is its PID 1, and when PID 1 exits
        # the kernel kills everything else in it, as in a runc container. util-linux's unshare forks it and
        # waits (a megabyte), passing its exit status on; --kill-child SIGKILLs it if unshare dies, which
        # our PR_SET_PDEATHSIG makes happen when kubelab dies: nothing a container started outlives kubelab.
        unshare = shutil.which("unshare")  # on kubelab's PATH: the container's may not have it
        if unshare is None:
            raise SetupError("unshare (util-linux) is not installed")
        argv = [unshare, "--pid", "--fork", "--kill-child", "--mount-proc", "--", *argv]
    try:
        os.execvpe(argv[0], list(argv), dict(env))
    except FileNotFoundError:
        raise SetupError(f'exec: "{argv[0]}": executable file not found in $PATH') from None
    except PermissionError:
        raise SetupError(f'exec: "{argv[0]}": permission denied') from None
    except OSError as exc:
        raise SetupError(f'exec: "{argv[0]}": {exc.strerror}') from None


def main(args: Sequence[str]) -> int:
    if len(args) == 3 and args[0] == "--sandbox":
        die_with_parent(int(args[2]))
        _check(_libc.unshare(CLONE_NEWUTS), "unshare UTS namespace")
        name = args[1].encode()
        _check(_libc.sethostname(name, len(name)), "sethostname")
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
        os.execvp("sleep", ["sleep", "infinity"])
    spec_path, errfd = args[0], int(args[1])
    os.set_inheritable(errfd, False)
    try:
        with open(spec_path, "rb") as f:
            spec = json.load(f)
        enter(spec)
        _exec(spec["argv"], spec["env"], pid_namespace=bool(spec.get("pidNamespace")))
    except (SetupError, OSError) as exc:
        os.write(errfd, str(exc).encode())
    return START_ERROR_EXIT


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
