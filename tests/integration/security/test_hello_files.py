#!/usr/bin/env python3
"""HELLO's process files (emulator/abi/control.h, docs/security.md), from a
raw control client: the daemon reaches a client's memory only through the
/proc/PID/mem and maps files the client hands over, refuses anything else,
and ends the connection once the process behind those files execs or exits.

usage: test_hello_files.py UROCED UROCE
"""

import ctypes
import mmap
import os
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "daemon"))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from uroce_control import Client  # noqa: E402
from uroce_harness import Daemon as HarnessDaemon  # noqa: E402

UROCED = UROCE = None
LOCAL_WRITE, REMOTE_WRITE, REMOTE_READ = 1, 2, 4
EFAULT, EINVAL, EALREADY = 14, 22, 114
WAIT_SECONDS = 20


def address_of(buf):
    return ctypes.addressof(ctypes.c_char.from_buffer(buf))


class HelloFiles(unittest.TestCase):
    def setUp(self):
        self.d = HarnessDaemon(UROCED, UROCE, name="uroce0", ip="192.0.2.3")
        self.addCleanup(self.d.close)
        self.buf = bytearray(8192)
        self.addr = address_of(self.buf)

    def client(self):
        c = Client(os.path.join(self.d.state, "uroce0.sock"))
        self.addCleanup(c.close)
        return c

    def open_files(self, pid="self", mem_mode=os.O_RDWR):
        fds = [os.open(f"/proc/{pid}/mem", mem_mode | os.O_CLOEXEC), os.open(f"/proc/{pid}/maps", os.O_RDONLY)]
        for fd in fds:
            self.addCleanup(os.close, fd)
        return fds

    def assert_dropped(self, c, what):
        """The daemon ends the connection within WAIT_SECONDS."""
        deadline = time.monotonic() + WAIT_SECONDS
        c.sock.settimeout(0.2)
        while time.monotonic() < deadline:
            try:
                if c.sock.recv(1) == b"":
                    return
            except TimeoutError:
                continue
            except OSError:
                return
        self.fail(f"{what}: the connection stayed open\n{self.d.log_text()}")

    def test_without_hello_memory_is_unreachable(self):
        c = self.client()
        _s, pd = c.alloc_pd()
        self.assertEqual(c.reg_mr(pd, self.addr, len(self.buf), LOCAL_WRITE)[0], EFAULT)

    def test_hello_refuses_anything_but_mem_and_maps(self):
        c = self.client()
        mem, maps = self.open_files()
        mem_ro, _ = self.open_files(mem_mode=os.O_RDONLY)
        r, w = os.pipe()
        self.addCleanup(os.close, r)
        self.addCleanup(os.close, w)
        for name, fds in [("no files", []), ("one file", [mem]), ("swapped", [maps, mem]),
                          ("a pipe for maps", [mem, r]), ("mem read-only", [mem_ro, maps]),
                          ("maps twice", [maps, maps])]:
            with self.subTest(name):
                self.assertEqual(c.hello(process_files=fds)[0], EINVAL)
        _s, pd = c.alloc_pd()
        self.assertEqual(c.reg_mr(pd, self.addr, len(self.buf), LOCAL_WRITE)[0], EFAULT, "still nothing reachable")
        self.assertEqual(c.hello()[0], 0)
        self.assertEqual(c.reg_mr(pd, self.addr, len(self.buf), LOCAL_WRITE)[0], 0)
        self.assertEqual(c.hello()[0], EALREADY, "whose memory it is does not change")

    def test_writable_mrs_need_writable_memory(self):
        c = self.client()
        self.assertEqual(c.hello()[0], 0)
        _s, pd = c.alloc_pd()
        libc = ctypes.CDLL(None, use_errno=True)
        libc.mmap.restype = ctypes.c_void_p
        libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                              ctypes.c_long]
        libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
        ro_addr = libc.mmap(None, 4096, mmap.PROT_READ, mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS, -1, 0)
        self.assertNotEqual(ro_addr, ctypes.c_void_p(-1).value)
        self.addCleanup(libc.munmap, ro_addr, 4096)
        self.assertEqual(c.reg_mr(pd, ro_addr, 4096, LOCAL_WRITE | REMOTE_WRITE)[0], EFAULT)
        self.assertEqual(c.reg_mr(pd, ro_addr, 4096, REMOTE_READ)[0], 0)

    def hello_for(self, child):
        """A connection whose HELLO hands over `child`'s files."""
        c = self.client()
        self.assertEqual(c.hello(process_files=self.open_files(child.pid))[0], 0)
        self.assertEqual(c.alloc_pd()[0], 0)
        return c

    def test_an_exited_process_loses_its_connection(self):
        child = subprocess.Popen(["sleep", "60"])
        self.addCleanup(child.wait)
        self.addCleanup(child.kill)
        c = self.hello_for(child)
        child.kill()
        child.wait()
        self.assert_dropped(c, "after the process exited")
        self.assertIn("exec'ed or exited", self.d.log_text())

    def test_an_execed_process_loses_its_connection(self):
        # The child execs `sleep` when told: same pid, a new image.
        child = subprocess.Popen([sys.executable, "-c", "import os,sys; sys.stdin.readline(); "
                                  "os.execvp('sleep', ['sleep', '60'])"], stdin=subprocess.PIPE)
        self.addCleanup(child.stdin.close)
        self.addCleanup(child.wait)
        self.addCleanup(child.kill)
        c = self.hello_for(child)
        child.stdin.write(b"go\n")
        child.stdin.flush()
        self.assert_dropped(c, "after the process exec'ed")
        self.assertIsNone(child.poll(), "the pid lives on, as sleep")
        self.assertIn("exec'ed or exited", self.d.log_text())


def main():
    global UROCED, UROCE
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    UROCED, UROCE = (os.path.abspath(p) for p in sys.argv[1:])
    result = unittest.main(argv=[sys.argv[0], "-v"], exit=False).result
    return 0 if result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main())
