"""The host side of the interop guest: a network namespace holding a tap, a
QEMU (TCG, 2 vCPUs) on that tap booting the kernel and initramfs that
build_guest.py made, and jobs run in the guest through the 9p share (the
protocol is described in init.sh).

Every wait is bounded; close() stops QEMU by its PID and removes the
namespace.
"""

import os
import re
import shutil
import signal
import subprocess
import tempfile
import time

NETNS_PREFIX = "ns-interop-"
TAP = "uritap0"
HOST_IP = "10.77.1.1"
GUEST_IP = "10.77.1.2"
PREFIX_LEN = 24
# The guest boots in about 10 s under TCG on an idle machine; a busy shared
# machine can take several times that.
BOOT_SECONDS = 180


class GuestError(Exception):
    pass


def qemu_binary():
    return shutil.which("qemu-system-x86_64")


class Job:
    """One job running in the guest."""

    def __init__(self, guest, name, script):
        self.guest = guest
        self.name = name
        self.script = script
        base = os.path.join(guest.jobs, name)
        self.paths = {k: f"{base}.{k}" for k in ("job", "run", "pid", "out", "rc")}
        tmp = base + ".tmp"
        with open(tmp, "w") as f:
            f.write(script + "\n")
        os.rename(tmp, self.paths["job"])

    def started(self):
        return os.path.exists(self.paths["pid"])

    def returncode(self):
        """The job's exit status, or None while it runs."""
        try:
            with open(self.paths["rc"]) as f:
                return int(f.read().strip() or "-1")
        except FileNotFoundError:
            return None

    def output(self):
        try:
            with open(self.paths["out"], errors="replace") as f:
                return f.read()
        except FileNotFoundError:
            return ""

    def wait(self, seconds):
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            rc = self.returncode()
            if rc is not None:
                return rc
            if not self.guest.alive():
                raise GuestError("the guest stopped\n" + self.guest.console_tail())
            time.sleep(0.05)
        return None

    def kill(self, seconds=30):
        """Stops the job's process group in the guest; waits for its status."""
        if self.returncode() is not None:
            return
        deadline = time.monotonic() + seconds
        while not self.started() and time.monotonic() < deadline:
            time.sleep(0.05)
        if self.started():
            with open(self.paths["pid"]) as f:
                pid = f.read().strip()
            # The job's shell and whatever it started (pkill -P: its children).
            self.guest.run(f"pkill -KILL -P {pid}; kill -KILL {pid}", seconds=seconds)
            self.wait(seconds)


class Guest:
    # The host namespace holding the tap is NETNS_PREFIX + the PID; a
    # benchmark's subclass names its own.
    netns_prefix = NETNS_PREFIX
    # More kernel command line, for a subclass.
    extra_append = ""
    # QEMU's -cpu model; None keeps TCG's default (qemu64: SSE2/SSE3 only).
    cpu_model = None

    def __init__(self, vmlinuz, initramfs, *, memory_mb=1024, cpus=2, workdir=None):
        self.qemu = None
        self.netns = None
        self._serial = 0
        self.tmp = tempfile.TemporaryDirectory(prefix="interop-guest-", dir=workdir)
        self.jobs = os.path.join(self.tmp.name, "jobs")
        os.makedirs(self.jobs)
        self.console_path = os.path.join(self.tmp.name, "console.log")
        self.remove_stale()
        self.netns = f"{self.netns_prefix}{os.getpid()}"
        try:
            self._ip("netns", "add", self.netns)
            self.host("ip", "link", "set", "lo", "up")
            argv = [
                "ip", "netns", "exec", self.netns, qemu_binary(),
                "-accel", "tcg,thread=multi", "-smp", str(cpus), "-m", str(memory_mb),
                *(["-cpu", self.cpu_model] if self.cpu_model else []),
                "-kernel", vmlinuz, "-initrd", initramfs,
                "-append", f"console=ttyS0 panic=-1 quiet uroce.ip={GUEST_IP}/{PREFIX_LEN} {self.extra_append}".rstrip(),
                "-netdev", f"tap,id=n0,ifname={TAP},script=no,downscript=no",
                "-device", "virtio-net-pci,netdev=n0,mac=52:54:00:77:01:02",
                "-fsdev", f"local,id=jobs,path={self.jobs},security_model=none",
                "-device", "virtio-9p-pci,fsdev=jobs,mount_tag=jobs",
                "-display", "none", "-monitor", "none", "-no-reboot",
                "-serial", f"file:{self.console_path}",
            ]
            self.qemu = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                         stderr=open(os.path.join(self.tmp.name, "qemu.err"), "w"))
            self._wait_for_tap()
            self.host("ip", "addr", "add", f"{HOST_IP}/{PREFIX_LEN}", "dev", TAP)
            self.host("ip", "link", "set", TAP, "up")
            self.host("sh", "-c", f"echo 1 > /proc/sys/net/ipv6/conf/{TAP}/disable_ipv6")
            self.boot_seconds = self._wait_ready()
        except BaseException:
            self.close()
            raise

    def __repr__(self):
        return f"Guest({self.netns})"

    @staticmethod
    def _ip(*args):
        subprocess.run(["ip", *args], check=True, capture_output=True, text=True, timeout=30)

    @classmethod
    def remove_stale(cls):
        """Namespaces a killed run of this suite left behind (their PID is gone)."""
        r = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, timeout=30)
        for line in r.stdout.splitlines():
            m = re.match(rf"({cls.netns_prefix}(\d+))\b", line)
            if m and not os.path.exists(f"/proc/{m.group(2)}"):
                subprocess.run(["ip", "netns", "del", m.group(1)], capture_output=True, timeout=30)

    def in_netns(self, argv):
        return ["ip", "netns", "exec", self.netns, *argv]

    def host(self, *argv, timeout=30):
        """Runs `argv` in the host namespace holding the tap; raises on failure."""
        return subprocess.run(self.in_netns(argv), check=True, capture_output=True, text=True, timeout=timeout)

    def _wait_for_tap(self):
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if subprocess.run(self.in_netns(["ip", "link", "show", TAP]), capture_output=True).returncode == 0:
                return
            if self.qemu.poll() is not None:
                raise GuestError(f"qemu exited {self.qemu.returncode}: {self.qemu_errors()}")
            time.sleep(0.05)
        raise GuestError("qemu made no tap in 30 s")

    def _wait_ready(self):
        start = time.monotonic()
        ready = os.path.join(self.jobs, "ready")
        while time.monotonic() - start < BOOT_SECONDS:
            if os.path.exists(ready):
                with open(ready) as f:
                    self.banner = f.read().strip()
                if "rxe0" not in self.banner:
                    raise GuestError(f"the guest has no rxe0: {self.banner}\n{self.console_tail()}")
                return time.monotonic() - start
            if self.qemu.poll() is not None:
                raise GuestError(f"qemu exited {self.qemu.returncode}: {self.qemu_errors()}\n{self.console_tail()}")
            time.sleep(0.1)
        raise GuestError(f"the guest was not ready in {BOOT_SECONDS} s\n{self.console_tail()}")

    def alive(self):
        return self.qemu is not None and self.qemu.poll() is None

    def qemu_errors(self):
        try:
            with open(os.path.join(self.tmp.name, "qemu.err")) as f:
                return f.read().strip()
        except FileNotFoundError:
            return ""

    def console_tail(self, lines=30):
        try:
            with open(self.console_path, errors="replace") as f:
                return "--- guest console\n" + "\n".join(f.read().splitlines()[-lines:])
        except FileNotFoundError:
            return "--- no guest console"

    def start(self, script, label="job"):
        """Starts a shell script in the guest; returns its Job."""
        self._serial += 1
        return Job(self, f"{self._serial:04d}-{re.sub(r'[^A-Za-z0-9_]', '_', label)[:40]}", script)

    def run(self, script, seconds=60, label="job"):
        """Runs a script in the guest to its end: (exit status or None if it
        did not end in time, output)."""
        job = self.start(script, label)
        rc = job.wait(seconds)
        if rc is None:
            job.kill()
        return rc, job.output()

    def close(self):
        if self.qemu is not None and self.qemu.poll() is None:
            self.qemu.send_signal(signal.SIGTERM)
            try:
                self.qemu.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.qemu.kill()
                self.qemu.wait()
        self.qemu = None
        if self.netns:
            subprocess.run(["ip", "netns", "del", self.netns], capture_output=True, timeout=30)
            self.netns = None
        self.tmp.cleanup()
