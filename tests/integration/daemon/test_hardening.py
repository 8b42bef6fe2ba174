"""What one client cannot do to the others (docs/security.md, "Denial of
service"): truncate the shared memory the daemon maps, freeze the daemon by
never reading its async events, exhaust the daemon's mappings, or read other
users' MRs from `uroce stats`.

usage: test_hardening.py UROCED UROCE [C_TEST_DIR]
"""

import ctypes
import errno
import fcntl
import json
import mmap
import os
import select
import shutil
import struct
import subprocess
import sys
import time
import unittest

import test_daemon
from test_daemon import Daemon
from uroce_control import CREATE_RELAXED_POOL, DESTROY_CQ, MODIFY_QP, QUERY_DEVICE, Client

SEALS = fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL
QP_ATTR = struct.Struct("<10I H9B5x 6I 32x")  # uroce_ctrl_qp_attr, up to the AH (zeroed)
QPS_RESET, QPS_INIT, QPS_ERR = 0, 1, 6
MASK_STATE, MASK_ACCESS, MASK_PKEY, MASK_PORT = 1, 8, 16, 32
WR_SEND = 2
SEND_WQE = struct.Struct("<QBBHIII40x")  # uroce_send_wqe: wr_id, opcode, num_sge, reserved, flags, imm, inline_len
WQ_PRODUCER = 64  # offset of uroce_wq_ring.producer (its own cache line, abi/rings.h)
WQ_HEADER = 3 * 64  # sizeof(uroce_wq_ring): the slots follow


def modify_qp(client, qpn, mask, state, port=0):
    attr = QP_ATTR.pack(state, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, port, 0, 0, 0, 0, 0, 0, 0, 0, 0)
    return client.call(MODIFY_QP, struct.pack("<II", qpn, mask) + attr)[0]


class SealedSharedMemory(unittest.TestCase):
    """Every memfd the daemon hands out is sealed: a client's ftruncate fails
    (EPERM), and nobody else notices anything."""

    @classmethod
    def setUpClass(cls):
        cls.d = Daemon()

    @classmethod
    def tearDownClass(cls):
        cls.d.stop()

    def assert_sealed(self, fd, what):
        self.assertEqual(fcntl.fcntl(fd, fcntl.F_GET_SEALS) & SEALS, SEALS, what)
        size = os.fstat(fd).st_size
        for length in (0, size // 2, size + 4096):
            with self.assertRaises(PermissionError, msg=f"ftruncate({what}, {length})"):
                os.ftruncate(fd, length)
        self.assertEqual(os.fstat(fd).st_size, size, what)

    def test_truncating_any_shared_memfd_fails_and_harms_nobody(self):
        a, b = self.d.client(), self.d.client()
        fds = []
        try:
            self.assertEqual(a.hello()[0], 0)
            self.assertEqual(b.hello()[0], 0)
            pd = a.alloc_pd()[1]
            status, cq, _cqe, _bytes, got = a.create_cq(16)
            self.assertEqual(status, 0)
            fds += got
            self.assert_sealed(got[0], "CQ ring")
            status, _qp, got = a.create_qp(pd, cq, cq)
            self.assertEqual(status, 0)
            fds += got
            self.assert_sealed(got[0], "QP SQ/RQ rings")
            status, *_rest, got = a.create_srq(pd, 16, 1)
            self.assertEqual(status, 0)
            fds += got
            self.assert_sealed(got[0], "SRQ ring")
            status, _body, got = a.call(CREATE_RELAXED_POOL, struct.pack("<IIII", pd, 64, 8, 1000))
            self.assertEqual(status, 0)
            fds += got
            self.assert_sealed(got[0], "relaxed-MR pool")
            # The daemon and the other client carry on; so does the one that tried.
            self.assertEqual(b.create_cq(4)[0], 0)
            self.assertEqual(a.create_cq(4)[0], 0)
            self.assertEqual(self.d.proc.poll(), None)
        finally:
            for fd in fds:
                os.close(fd)
            a.close()
            b.close()


class AsyncEventFlood(unittest.TestCase):
    """A client that provokes more async events than its pipe holds and never
    reads them cannot stop the daemon: `uroce status` answers within 1 s, the
    backlog is bounded (the rest dropped and logged), SIGTERM works."""

    PIPE_RECORDS = 65536 // 16     # a pipe's default capacity, in 16-byte records
    BACKLOG = 1024                 # AsyncEventQueue::kMaxBacklog
    OVERRUNS = PIPE_RECORDS + BACKLOG + 100

    def setUp(self):
        self.d = Daemon()

    def tearDown(self):
        self.d.stop()

    def overrun_one_cq(self, c, pd, doorbell):
        """A 1-entry CQ, an RC QP in ERR on it, two send WQEs flushed into
        it: the second completion overruns the CQ (IBV_EVENT_CQ_ERR)."""
        status, cq, _cqe, _bytes, fds = c.create_cq(1)
        self.assertEqual(status, 0)
        os.close(fds[0])
        status, qp, fds = c.create_qp(pd, cq, cq, cap=(2, 1, 1, 1, 0))
        self.assertEqual(status, 0)
        self.assertEqual(modify_qp(c, qp["qpn"], MASK_STATE | MASK_ACCESS | MASK_PKEY | MASK_PORT, QPS_INIT, 1), 0)
        self.assertEqual(modify_qp(c, qp["qpn"], MASK_STATE, QPS_ERR), 0)
        with mmap.mmap(fds[0], qp["ring_bytes"]) as m:
            os.close(fds[0])
            stride = struct.unpack_from("<I", m, 8)[0]
            for slot in range(2):
                SEND_WQE.pack_into(m, WQ_HEADER + slot * stride, slot, WR_SEND, 0, 0, 0, 0, 0)
            struct.pack_into("<I", m, WQ_PRODUCER, 2)
        os.write(doorbell, struct.pack("<Q", 1))

    def test_a_client_that_never_reads_does_not_freeze_the_daemon(self):
        c = self.d.client()
        c.sock.settimeout(10)  # a frozen daemon fails the test instead of hanging it
        status, _id, fds = c.hello()
        self.assertEqual(status, 0)
        async_fd = fds[0]
        pd = c.alloc_pd()[1]
        status, fds = c.doorbell()
        doorbell = fds[0]
        try:
            for _ in range(self.OVERRUNS):
                self.overrun_one_cq(c, pd, doorbell)
            # Wait (bounded) until the engine flushed them all.
            self.d.wait_for(lambda s: "dropping new ones" in self.d.log_text(), "events dropped")
            started = time.monotonic()
            r = subprocess.run([test_daemon.UROCE, "status", "--state-dir", self.d.state], capture_output=True,
                               text=True, timeout=10)
            took = time.monotonic() - started
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertLess(took, 1.0, "uroce status took too long")
            # Reading now: the pipe's records, then the backlog behind them; nothing more.
            records = self.read_all(async_fd, self.PIPE_RECORDS + self.BACKLOG)
            self.assertEqual(len(records), self.PIPE_RECORDS + self.BACKLOG)
            self.assertTrue(all(struct.unpack("<QII", r)[1] == 0 for r in records))  # IBV_EVENT_CQ_ERR
        finally:
            os.close(doorbell)
            os.close(async_fd)
            c.close()
        self.d.proc.terminate()
        self.assertEqual(self.d.proc.wait(timeout=10), 0)

    @staticmethod
    def read_all(fd, expected, seconds=10):
        data = b""
        deadline = time.monotonic() + seconds
        while len(data) < expected * 16 and time.monotonic() < deadline:
            if select.select([fd], [], [], 0.5)[0]:
                data += os.read(fd, 65536)
        # Anything beyond the bound would be there by now (it is written as the pipe drains).
        if select.select([fd], [], [], 0.2)[0]:
            data += os.read(fd, 65536)
        return [data[i:i + 16] for i in range(0, len(data), 16)]


class Quotas(unittest.TestCase):
    """Per-client quotas (uroced --client-max-*): the client at its limit
    gets EDQUOT, the others carry on, and what it frees it may take again."""

    def with_daemon(self, *flags):
        d = Daemon(*flags)
        self.addCleanup(d.stop)
        a, b = d.client(), d.client()
        self.addCleanup(a.close)
        self.addCleanup(b.close)
        self.assertEqual(a.hello()[0], 0)
        self.assertEqual(b.hello()[0], 0)
        return d, a, b

    def create_cq(self, client, cqe=1):
        status, handle, _cqe, _bytes, fds = client.create_cq(cqe)
        for fd in fds:
            os.close(fd)
        return status, handle

    def test_object_quota(self):
        _d, a, b = self.with_daemon("--client-max-objects", "8")

        def pool(capacity):
            status, _body, fds = a.call(CREATE_RELAXED_POOL, struct.pack("<IIII", pd, capacity, 1, 1000))
            for fd in fds:
                os.close(fd)
            return status

        status, pd = a.alloc_pd()  # 1
        self.assertEqual(status, 0)
        self.assertEqual(pool(8), errno.EDQUOT)  # a key per slot: 1 + 8 > 8
        self.assertEqual(pool(5), 0)             # 6
        status, second = a.alloc_pd()            # 7
        self.assertEqual(status, 0)
        self.assertEqual(a.alloc_pd()[0], 0)     # 8
        self.assertEqual(a.alloc_pd()[0], errno.EDQUOT)
        self.assertEqual(self.create_cq(a)[0], errno.EDQUOT)
        self.assertEqual(b.alloc_pd()[0], 0)
        self.assertEqual(a.dealloc_pd(second), 0)
        self.assertEqual(a.alloc_pd()[0], 0)

    def test_mapping_quota(self):
        _d, a, b = self.with_daemon("--client-max-mappings", "4")
        cqs = [self.create_cq(a) for _ in range(4)]
        self.assertEqual([s for s, _cq in cqs], [0] * 4)
        self.assertEqual(self.create_cq(a)[0], errno.EDQUOT)
        pd = a.alloc_pd()[1]  # no mapping: still fine
        self.assertEqual(a.create_srq(pd, 4, 1)[0], errno.EDQUOT)
        self.assertEqual(self.create_cq(b)[0], 0)
        self.assertEqual(a.call(DESTROY_CQ, struct.pack("<II", cqs[0][1], 0))[0], 0)
        self.assertEqual(self.create_cq(a)[0], 0)

    def test_memory_quota(self):
        _d, a, b = self.with_daemon("--client-max-memory-mib", "1")
        self.assertEqual(self.create_cq(a, 65536)[0], errno.EDQUOT)  # a 4 MiB ring
        self.assertEqual(self.create_cq(a, 1024)[0], 0)              # 64 KiB
        self.assertEqual(self.create_cq(b, 1024)[0], 0)

    def test_device_limits_fit_the_daemons_mappings(self):
        d, a, _b = self.with_daemon()
        status, body, _ = a.call(QUERY_DEVICE)
        self.assertEqual(status, 0)
        max_qp, _wr, _flags, _sge, max_cq = struct.unpack_from("<5I", body, 44)
        with open("/proc/sys/vm/max_map_count") as f:
            max_maps = int(f.read())
        self.assertLess(max_cq, max_maps)
        self.assertLess(max_qp, max_maps)
        self.assertIn("per client:", d.log_text())


# Run as another user: registers an MR of its own, then prints what LIST_MRS
# and STATS show it (one JSON object).
OTHER_USER_CLIENT = r"""
import ctypes, json, struct, sys
sys.path.insert(0, sys.argv[1])
from uroce_control import Client
c = Client(sys.argv[2])
assert c.hello()[0] == 0
buf = ctypes.create_string_buffer(8192)
_s, pd = c.alloc_pd()
status, keys = c.reg_mr(pd, ctypes.addressof(buf), 8192, 1)
assert status == 0, status
mrs, first = [], 0
while True:
    status, body, _ = c.call(29, struct.pack("<II", first, 0))
    count, nxt = struct.unpack_from("<II", body)
    mrs += [struct.unpack_from("<4IQQ", body, 8 + 40 * i) for i in range(count)]
    if nxt == 0:
        break
    first = nxt
status, body, _ = c.call(28)
shared, copy, unserved = struct.unpack_from("<3I", body, len(body) - 16)
print(json.dumps({"own_lkey": keys[0], "listed": [m[0] for m in mrs], "counted": shared + copy + unserved}),
      flush=True)
sys.stdin.read()  # holds its MR until the test is done
"""


class StatsVisibility(unittest.TestCase):
    """LIST_MRS and STATS show a user only the MRs of its own clients; root
    (and the daemon's owner) sees every client's."""

    def test_a_user_sees_only_its_own_mrs(self):
        if os.geteuid() != 0:
            self.skipTest("needs root to run a client as another user (nobody)")
        d = Daemon()
        self.addCleanup(d.stop)
        os.chmod(d.state, 0o755)  # the socket is 0666; let nobody reach it
        root = d.client()
        self.addCleanup(root.close)
        self.assertEqual(root.hello()[0], 0)
        buf = ctypes.create_string_buffer(8192)
        pd = root.alloc_pd()[1]
        status, keys = root.reg_mr(pd, ctypes.addressof(buf), 8192, 1)
        self.assertEqual(status, 0)
        root_lkey = keys[0]

        def as_nobody():
            os.setgroups([])
            os.setgid(65534)
            os.setuid(65534)

        here = os.path.dirname(os.path.abspath(__file__))
        python = shutil.which("python3", path="/usr/bin:/bin")  # one `nobody` may run (not under /root)
        if python is None:
            self.skipTest("no python3 in /usr/bin for the other user")
        child = subprocess.Popen([python, "-c", OTHER_USER_CLIENT, here, d.socket], stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, text=True, preexec_fn=as_nobody)
        line = child.stdout.readline()
        seen = json.loads(line)
        self.assertEqual(seen["listed"], [seen["own_lkey"]])
        self.assertEqual(seen["counted"], 1)
        # `uroce stats` as that user: the same view.
        r = subprocess.run([test_daemon.UROCE, "stats", "--json", "--state-dir", d.state], capture_output=True,
                           text=True, timeout=30, preexec_fn=as_nobody)
        self.assertEqual(r.returncode, 0, r.stderr)
        listed = [m["lkey"] for m in json.loads(r.stdout)["mrs"]]
        self.assertNotIn(root_lkey, listed)
        # Root sees both (the other user's client still holds its MR).
        r = subprocess.run([test_daemon.UROCE, "stats", "--json", "--state-dir", d.state], capture_output=True,
                           text=True, timeout=30)
        self.assertEqual(r.returncode, 0, r.stderr)
        listed = [m["lkey"] for m in json.loads(r.stdout)["mrs"]]
        self.assertIn(root_lkey, listed)
        self.assertIn(seen["own_lkey"], listed)
        child.stdin.close()
        child.stdout.close()
        child.wait(timeout=30)


if __name__ == "__main__":
    test_daemon.UROCED, test_daemon.UROCE = sys.argv[1], sys.argv[2]
    C_TESTS = sys.argv[3] if len(sys.argv) > 3 else None
    unittest.main(argv=[sys.argv[0], "-v"])
