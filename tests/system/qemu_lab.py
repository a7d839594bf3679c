"""The kernel lab's QEMU route (kernel_lab.py chooses it where user-mode Linux's init does not start).

Debian's generic kernel (`linux-image-<release>-amd64`, fetched with `apt-get download` and unpacked
into the lab's cache, never installed) boots under `qemu-system-x86_64 -accel tcg` (KVM is not relied
on: it hangs on some hosts) from a busybox initramfs written here. The initramfs loads virtio and 9p,
mounts the host's root read-only and the run's workdir read-write over virtio-9p, gives the guest
its own /dev, /dev/shm and /tmp, and switch_roots to the same init script as the user-mode route.
"""

from __future__ import annotations

import fcntl
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

QEMU = "qemu-system-x86_64"
BUSYBOX = Path("/bin/busybox")  # Debian busybox-static: runs with no library beside it
META = "linux-image-amd64"  # Debian's metapackage: depends on the current generic kernel
BOOT_MODULES = ("virtio_pci", "9pnet_virtio", "9p")
MSIZE = 512000  # bytes per 9p message (virtio's most): fewer round trips per file read
CPUS = 1  # guest CPUs under TCG (one host thread each)


@contextmanager
def locked(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on `path` (a file of its own): one process at a time, pytest-xdist workers included."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        yield


def kernel(cache: Path) -> Path:
    """The unpacked kernel package (boot/vmlinuz-*, lib/modules/*/ with modules.dep), fetched on first use."""
    with locked(cache / "kernel.lock"):
        found = sorted(cache.glob("linux-image-*-amd64/boot/vmlinuz-*"))
        if found:
            return found[-1].parents[1]
        name = _package_name()
        if not name:  # a fresh machine's apt has no package lists yet
            _check("apt-get", "update", "-qq")
            name = _package_name()
        if not name:
            raise RuntimeError(f"apt knows no {META}: the QEMU route needs Debian's generic kernel")
        partial = cache / f"{name}.partial"
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir(parents=True)
        _check("apt-get", "download", name, cwd=partial)
        (deb,) = partial.glob("*.deb")
        _check("dpkg-deb", "-x", str(deb), str(partial))
        deb.unlink()
        (release,) = (p.name for p in (partial / "lib/modules").iterdir())
        _check("depmod", "-b", str(partial), release)  # the package leaves modules.dep to its postinst
        return partial.rename(cache / name)


def _package_name() -> str | None:
    depends = subprocess.run(["apt-cache", "depends", META], capture_output=True, text=True).stdout
    return next((line.split()[-1] for line in depends.splitlines() if "Depends: linux-image-" in line), None)


def _check(*args: str, cwd: Path | None = None) -> None:
    done = subprocess.run(args, cwd=cwd, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(args)}: exit {done.returncode}: {done.stderr.strip()}")


def module_dir(unpacked: Path) -> Path:
    (found,) = (unpacked / "lib/modules").iterdir()
    return found


def newc(entries: list[tuple[str, int, bytes, int]]) -> bytes:
    """A cpio archive in the kernel's initramfs format ("newc"): (name, mode, data, rdev) each."""
    out = bytearray()

    def add(ino: int, name: str, mode: int, data: bytes, rdev: int) -> None:
        fields = (ino, mode, 0, 0, 1, 0, len(data), 0, 0, rdev >> 8, rdev & 0xFF, len(name) + 1, 0)
        out.extend(b"070701" + "".join(f"{v:08x}" for v in fields).encode() + name.encode() + b"\0")
        out.extend(b"\0" * (-len(out) % 4) + data)
        out.extend(b"\0" * (-len(out) % 4))

    for ino, (name, mode, data, rdev) in enumerate(entries, start=1):
        add(ino, name, mode, data, rdev)
    add(0, "TRAILER!!!", 0, b"", 0)
    return bytes(out)


def initramfs(path: Path, modules: list[str]) -> None:
    """busybox, the 9p modules (`modules` in load order) and an /init that mounts the guest's root and
    switch_roots to $labinit (both from the kernel's command line)."""
    names = [Path(m).name for m in modules]
    mount9p = f"mount -t 9p -o trans=virtio,version=9p2000.L,msize={MSIZE}"
    init = [
        "#!/bin/busybox sh",
        "export PATH=/bin",
        "/bin/busybox --install -s /bin",
        'fail() { echo "lab initramfs: $*"; poweroff -f; }',
        *(f"insmod /lib/{n} || fail 'insmod {n}'" for n in names),
        f"{mount9p},ro,cache=loose hostroot /root || fail 'mount hostroot'",
        "mount -t tmpfs tmp /root/tmp && mkdir -p \"/root$labwork\" || fail 'mount /tmp'",
        f'{mount9p},cache=none work "/root$labwork" || fail "mount $labwork"',
        "mount -t devtmpfs dev /root/dev && mkdir -p /root/dev/shm && mount -t tmpfs shm /root/dev/shm",
        'unset PATH; exec /bin/switch_root /root "$labinit"',  # init finds its own PATH, as on user-mode Linux
    ]
    dirs = ["bin", "dev", "lib", "proc", "root", "sys"]
    entries = [(d, 0o40755, b"", 0) for d in dirs] + [("dev/console", 0o20600, b"", 5 << 8 | 1)]
    entries += [("bin/busybox", 0o100755, BUSYBOX.read_bytes(), 0), ("init", 0o100755, "\n".join(init).encode(), 0)]
    entries += [(f"lib/{n}", 0o100644, Path(m).read_bytes(), 0) for n, m in zip(names, modules, strict=True)]
    path.write_bytes(newc(entries))


def command(unpacked: Path, boot_modules: list[str], workdir: Path, init: Path, mem: str) -> list[str]:
    """The QEMU command line that boots the lab in `workdir` into `init` (`boot_modules`: BOOT_MODULES'
    files in load order); its serial console is stdout."""
    initrd = workdir / "initrd.cpio"
    initramfs(initrd, boot_modules)
    (vmlinuz,) = (unpacked / "boot").glob("vmlinuz-*")
    virtfs = "local,security_model=passthrough,multidevs=remap"
    append = f"console=ttyS0 panic=-1 quiet labwork={workdir} labinit={init}"
    return [
        *[QEMU, "-accel", "tcg,thread=multi", "-cpu", "max", "-smp", str(CPUS), "-m", mem],
        *["-nodefaults", "-no-user-config", "-display", "none", "-no-reboot", "-serial", "stdio"],
        *["-kernel", str(vmlinuz), "-initrd", str(initrd), "-append", append],
        *["-virtfs", f"{virtfs},path=/,mount_tag=hostroot,readonly=on"],
        *["-virtfs", f"{virtfs},path={workdir},mount_tag=work"],
    ]
