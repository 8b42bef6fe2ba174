#!/usr/bin/env python3
"""Stock libibverbs programs against a running uroced, through the provider.

usage: test_provider_daemon.py UROCED UROCE DIR_OF_C_TESTS [--preload LIBS]

Starts `uroced --port loopback --ip 192.0.2.1 --mtu 1500 --state-dir TMP`
(active MTU 1024, so qp_states can ask for a path MTU above it; as root it
makes /dev/infiniband/uverbs_uroce0 itself) and runs every program with
`uroce exec --state-dir TMP --`: ibv_devices, ibv_devinfo -v, the C programs
mr_rules, qp_states, post_rules, daemon_gone, flush_on_loss, relaxed_mr,
comp_channel (built by meson beside this file), ibv_rc_pingpong and
ib_write_bw up to their first data-path step, and both of them running when
the daemon is stopped (SIGTERM) or killed (SIGKILL): they must end with an
error within seconds instead of spinning on empty CQs. Also, as a raw client of the control socket
(class SharedRings): the rings CREATE_CQ / CREATE_QP / CREATE_SRQ pass, the
completion channel's fd, DOORBELL. Exit 77 (skipped) when the device node cannot be made (not root).
"""

import json
import mmap
import os
import re
import select
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "daemon"))
from uroce_control import MODIFY_SRQ, Client  # noqa: E402

UROCED = UROCE = BIN = None
SKIP = 77
NODE = "/dev/infiniband/uverbs_uroce0"
DESTROY_CQ = 16
EINVAL = 22


# ibv_rc_pingpong and perftest exchange addresses over this TCP port.
TOOLS_TCP_PORT = 18515


def wait_listening(port, proc, seconds=20):
    """Waits until something listens on TCP `port` (read from /proc/net/tcp*,
    so the server's single accept is not used up by a probe)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for table in ("/proc/net/tcp", "/proc/net/tcp6"):
            try:
                with open(table) as f:
                    for line in f.readlines()[1:]:
                        local, state = line.split()[1], line.split()[3]
                        if state == "0A" and int(local.rsplit(":", 1)[1], 16) == port:  # 0A: LISTEN
                            return
            except FileNotFoundError:
                pass
        if proc.poll() is not None:
            return  # it died; its output tells why
        time.sleep(0.01)
    raise AssertionError(f"nothing listened on TCP port {port} within {seconds} s")


class Daemon:
    def __init__(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="uroce-provider-")
        self.state = self.tmp.name
        self.log = open(os.path.join(self.state, "uroced.log"), "w+")
        self.proc = subprocess.Popen([UROCED, "--port", "loopback", "--ip", "192.0.2.1", "--mtu", "1500",
                                      "--state-dir", self.state], stderr=self.log)
        r = subprocess.run([UROCE, "status", "--state-dir", self.state, "--wait", "20"], capture_output=True,
                           text=True, timeout=30)
        if r.returncode != 0:
            self.stop()
            raise RuntimeError(f"uroced did not become ready: {r.stderr}")
        self.socket = os.path.join(self.state, "uroce0.sock")

    def exec_argv(self, *argv):
        return [UROCE, "exec", "--state-dir", self.state, "--", *argv]

    def run(self, *argv, timeout=60):
        r = subprocess.run(self.exec_argv(*argv), capture_output=True, text=True, timeout=timeout)
        print(f"$ {' '.join(argv)} (exit {r.returncode})\n{r.stdout}{r.stderr}", file=sys.stderr)
        return r

    def status(self):
        c = Client(self.socket)
        try:
            return c.status()
        finally:
            c.close()

    def counts(self):
        """STATUS with the queue-object counts appended to the reply."""
        c = Client(self.socket)
        try:
            status, body, _ = c.call(14)
            assert status == 0
            cqs, qps, srqs, ahs = struct.unpack_from("<4I", body, 48)
            return {"cqs": cqs, "qps": qps, "srqs": srqs, "ahs": ahs}
        finally:
            c.close()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(timeout=30)
        self.log.close()
        self.tmp.cleanup()


class WithDaemon(unittest.TestCase):
    def setUp(self):
        self.d = Daemon()

    def tearDown(self):
        self.d.stop()

    def assertClean(self, r):
        self.assertGreaterEqual(r.returncode, 0, "killed by a signal")

    def test_devices_and_devinfo(self):
        r = self.d.run("ibv_devices")
        self.assertEqual(r.returncode, 0)
        self.assertRegex(r.stdout, r"(?m)^\s*uroce0\s+[0-9a-f]{16}\s*$")
        r = self.d.run("ibv_devinfo", "-v")
        self.assertEqual(r.returncode, 0, r.stderr)
        out = r.stdout
        for pattern in [r"hca_id:\s*uroce0", r"transport:\s*InfiniBand \(0\)", r"fw_ver:\s*uroce 0\.1\.0",
                        r"state:\s*PORT_ACTIVE \(4\)", r"active_mtu:\s*1024 \(3\)", r"link_layer:\s*Ethernet",
                        r"atomic_cap:\s*ATOMIC_HCA \(1\)", r"max_qp_rd_atom:\s*128", r"vendor_id:\s*0x75726f", r"num_comp_vectors:\s*1"]:
            self.assertRegex(out, pattern)
        gids = re.findall(r"GID\[\s*(\d+)\]:\s*(\S+?), (.+)$", out, re.M)
        self.assertEqual([(i, t) for i, _g, t in gids], [("0", "RoCE v1"), ("1", "RoCE v2"), ("2", "RoCE v2")])
        self.assertTrue(gids[0][1].startswith("fe80:") and gids[1][1].startswith("fe80::"))
        self.assertEqual(gids[2][1], "::ffff:192.0.2.1")
        # ibv_devinfo's node GUID (from query_device, i.e. the daemon) agrees with sysfs.
        guid = re.search(r"node_guid:\s*(\S+)", out).group(1).replace(":", "")
        self.assertIn(guid, r.stdout + self.d.run("ibv_devices").stdout)

    def test_attributes_come_from_the_daemon(self):
        # The same program against a daemon with a 9000-byte MTU: active_mtu follows.
        self.d.stop()
        self.d = Daemon.__new__(Daemon)
        self.d.tmp = tempfile.TemporaryDirectory(prefix="uroce-provider-")
        self.d.state = self.d.tmp.name
        self.d.log = open(os.path.join(self.d.state, "uroced.log"), "w+")
        self.d.proc = subprocess.Popen([UROCED, "--port", "loopback", "--ip", "192.0.2.1", "--mtu", "9000",
                                        "--state-dir", self.d.state], stderr=self.d.log)
        subprocess.run([UROCE, "status", "--state-dir", self.d.state, "--wait", "20"], capture_output=True, timeout=30)
        r = self.d.run("ibv_devinfo", "-v")
        self.assertRegex(r.stdout, r"active_mtu:\s*4096 \(5\)")

    def test_mr_rules(self):
        r = self.d.run(os.path.join(BIN, "mr_rules"))
        self.assertEqual(r.returncode, 0, r.stdout)
        self.assertIn("0 failure(s)", r.stdout)
        s = self.d.status()
        self.assertEqual((s["pds"], s["mrs"], s["mws"]), (0, 0, 0))

    def test_relaxed_mr(self):
        r = self.d.run(os.path.join(BIN, "relaxed_mr"))
        self.assertEqual(r.returncode, 0, r.stdout)
        self.assertIn("0 failure(s)", r.stdout)
        s = self.d.status()
        self.assertEqual((s["pds"], s["relaxed_pools"]), (0, 0))

    def test_qp_states(self):
        r = self.d.run(os.path.join(BIN, "qp_states"))
        self.assertEqual(r.returncode, 0, r.stdout)
        self.assertIn("0 failure(s)", r.stdout)
        self.assertEqual(self.d.counts(), {"cqs": 0, "qps": 0, "srqs": 0, "ahs": 0})

    def test_objects_of_a_departed_client_are_destroyed(self):
        c = Client(self.d.socket)
        c.hello()
        _, pd = c.alloc_pd()
        status, cq, _cqe, _bytes, fds = c.create_cq(16)
        self.assertEqual(status, 0)
        self.assertEqual(len(fds), 1)  # the CQ ring
        os.close(fds[0])
        status, qp, fds = c.create_qp(pd, cq, cq)
        self.assertEqual(status, 0)
        self.assertEqual(len(fds), 1)  # the QP's rings
        os.close(fds[0])
        # Another client cannot name them.
        other = Client(self.d.socket)
        self.assertEqual(other.call(DESTROY_CQ, struct.pack("<II", cq, 0))[0], EINVAL)
        self.assertEqual(other.create_qp(pd, cq, cq)[0], EINVAL)
        other.close()
        self.assertEqual(self.d.counts(), {"cqs": 1, "qps": 1, "srqs": 0, "ahs": 0})
        before = self.d.status()["objects_reclaimed"]
        c.close()
        deadline = time.monotonic() + 20
        while self.d.counts()["qps"] != 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        self.assertEqual(self.d.counts(), {"cqs": 0, "qps": 0, "srqs": 0, "ahs": 0})
        self.assertGreaterEqual(self.d.status()["objects_reclaimed"] - before, 3)  # QP, CQ, PD

    def test_post_rules(self):
        r = self.d.run(os.path.join(BIN, "post_rules"))
        self.assertEqual(r.returncode, 0, r.stdout)
        self.assertIn("0 failure(s)", r.stdout)
        self.assertEqual(self.d.counts(), {"cqs": 0, "qps": 0, "srqs": 0, "ahs": 0})

    def test_daemon_gone(self):
        p = subprocess.Popen(self.d.exec_argv(os.path.join(BIN, "daemon_gone")), stdout=subprocess.PIPE, text=True)
        try:
            first = p.stdout.readline() + p.stdout.readline()
            self.assertIn("ready", first)
            self.d.proc.send_signal(signal.SIGTERM)
            out, _ = p.communicate(timeout=60)
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
        print(first + out, file=sys.stderr)
        self.assertEqual(p.returncode, 0, out)
        self.assertIn("0 failure(s)", out)

    def flush_on_loss(self, sig):
        p = subprocess.Popen(self.d.exec_argv(os.path.join(BIN, "flush_on_loss")), stdout=subprocess.PIPE, text=True)
        try:
            first = ""
            while "ready" not in first and p.poll() is None:
                first += p.stdout.readline()
            self.assertIn("ready", first)
            self.d.proc.send_signal(sig)
            out, _ = p.communicate(timeout=60)
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
        print(first + out, file=sys.stderr)
        self.assertEqual(p.returncode, 0, out)
        self.assertIn("15 completions", out)
        self.assertIn("0 failure(s)", out)

    def test_flush_on_loss_sigterm(self):
        self.flush_on_loss(signal.SIGTERM)

    def test_flush_on_loss_sigkill(self):
        self.flush_on_loss(signal.SIGKILL)

    def flush_half_received(self, sig):
        """A receive half filled, a thread blocked in ibv_get_cq_event."""
        p = subprocess.Popen(self.d.exec_argv(os.path.join(BIN, "flush_half_received")), stdout=subprocess.PIPE,
                             text=True)
        try:
            first = ""
            while "ready" not in first and p.poll() is None:
                first += p.stdout.readline()
            self.assertIn("ready", first)
            self.d.proc.send_signal(sig)
            out, _ = p.communicate(timeout=60)
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
        print(first + out, file=sys.stderr)
        self.assertEqual(p.returncode, 0, first + out)
        self.assertIn("0 failure(s)", out)

    def test_flush_half_received_sigterm(self):
        self.flush_half_received(signal.SIGTERM)

    def test_flush_half_received_sigkill(self):
        self.flush_half_received(signal.SIGKILL)

    def run_pair(self, argv, server_marker):
        """Server and client of a two-sided tool; both are killed (by PID)
        after a bounded time: the data path does not exist yet."""
        env = dict(os.environ)
        server = subprocess.Popen(["stdbuf", "-oL", "-eL"] + self.d.exec_argv(*argv), stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True, env=env)
        wait_listening(TOOLS_TCP_PORT, server)
        client = subprocess.Popen(["stdbuf", "-oL", "-eL"] + self.d.exec_argv(*argv, "localhost"),
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
        outputs = []
        for p in (client, server):
            try:
                out, _ = p.communicate(timeout=10)
            except subprocess.TimeoutExpired:
                p.send_signal(signal.SIGKILL)
                out, _ = p.communicate()
            outputs.append(out)
        print(f"--- client\n{outputs[0]}--- server\n{outputs[1]}", file=sys.stderr)
        return outputs

    def test_rc_pingpong_reaches_the_data_path(self):
        client, _server = self.run_pair(["ibv_rc_pingpong", "-d", "uroce0", "-g", "2"], "local address")
        self.assertRegex(client, r"local address:\s+LID 0x0000, QPN 0x[0-9a-f]+, PSN 0x[0-9a-f]+, GID ::ffff:192\.0\.2\.1")
        self.assertRegex(client, r"remote address:\s+LID 0x0000, QPN 0x[0-9a-f]+")
        for failure in ("Couldn't get", "Failed to", "Couldn't create", "Couldn't register", "Couldn't modify",
                        "Couldn't connect", "Couldn't post receive", "Couldn't allocate"):
            self.assertNotIn(failure, client)

    def test_attr_values(self):
        r = self.d.run(os.path.join(BIN, "attr_values"))
        self.assertEqual(r.returncode, 0, r.stdout)
        self.assertIn("0 failure(s)", r.stdout)

    def test_refused_modify_is_logged_with_its_reason(self):
        # attr_values asks for max_rd_atomic 129 once (RTR -> RTS): the daemon says why it refused.
        self.d.run(os.path.join(BIN, "attr_values"))
        self.d.log.flush()
        with open(self.d.log.name) as f:
            log = f.read()
        self.assertRegex(log, r"modify of QP 0x[0-9a-f]+ \(attr_mask 0x12e01\) refused: max_rd_atomic above the device")

    def test_comp_channel(self):
        r = self.d.run(os.path.join(BIN, "comp_channel"))
        self.assertEqual(r.returncode, 0, r.stdout)
        self.assertIn("0 failure(s)", r.stdout)

    def test_rc_pingpong_with_events_reaches_the_data_path(self):
        client, _server = self.run_pair(["ibv_rc_pingpong", "-d", "uroce0", "-g", "2", "-e"], "local address")
        self.assertRegex(client, r"local address:\s+LID 0x0000, QPN 0x[0-9a-f]+")
        self.assertRegex(client, r"remote address:\s+LID 0x0000, QPN 0x[0-9a-f]+")
        for failure in ("Couldn't create completion channel", "Couldn't request CQ notification", "Couldn't create",
                        "Couldn't modify", "Couldn't connect"):
            self.assertNotIn(failure, client)

    def test_ib_write_bw_reaches_the_data_path(self):
        client, server = self.run_pair(["ib_write_bw", "-d", "uroce0"], "local address")
        for out in (client, server):
            self.assertRegex(out, r"local address: LID 0000 QPN 0x[0-9a-f]+")
            self.assertRegex(out, r"remote address: LID 0000 QPN 0x[0-9a-f]+")
            self.assertRegex(out, r"GID index\s*:\s*2")
        # Past INIT, RTR and RTS: the first failure, if any, is the first send.
        for failure in ("Failed to modify QP", "Couldn't create", "Unable to create QP", "Failed to create",
                        "Couldn't allocate", "Couldn't get"):
            self.assertNotIn(failure, client)


class ProgramsWhenTheDaemonGoes(unittest.TestCase):
    """Unmodified programs mid-transfer when the daemon goes: the provider
    flushes their outstanding work requests, so they see errors and exit."""

    # How long a program may take to notice: the provider looks every few
    # ms; the rest is the program's own exit.
    EXIT_WITHIN_S = 5

    def setUp(self):
        self.d = Daemon()

    def tearDown(self):
        self.d.stop()

    def start_pair(self, argv):
        server = subprocess.Popen(["stdbuf", "-oL", "-eL"] + self.d.exec_argv(*argv), stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True)
        self.addCleanup(lambda: server.poll() is None and server.kill())
        wait_listening(TOOLS_TCP_PORT, server)
        client = subprocess.Popen(["stdbuf", "-oL", "-eL"] + self.d.exec_argv(*argv, "localhost"),
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.addCleanup(lambda: client.poll() is None and client.kill())
        return server, client

    def wait_for_traffic(self, procs):
        """Until the daemon has carried a thousand packets (bounded)."""
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            for p in procs:
                if p.poll() is not None:
                    self.fail(f"a program ended before the daemon went:\n{p.stdout.read()}")
            r = subprocess.run([UROCE, "stats", "--json", "--state-dir", self.d.state], capture_output=True,
                               text=True, timeout=30)
            if r.returncode == 0 and json.loads(r.stdout)["engine"]["rx_packets"] > 1000:
                return
            time.sleep(0.05)
        self.fail("no traffic within 30 s")

    def daemon_goes_under(self, argv, sig):
        server, client = self.start_pair(argv)
        self.wait_for_traffic([server, client])
        gone_at = time.monotonic()
        self.d.proc.send_signal(sig)
        for name, p in (("client", client), ("server", server)):
            try:
                out, _ = p.communicate(timeout=self.EXIT_WITHIN_S)
            except subprocess.TimeoutExpired:
                p.kill()
                out, _ = p.communicate()
                print(out, file=sys.stderr)
                self.fail(f"{argv[0]} {name} still running {self.EXIT_WITHIN_S} s after the daemon went")
            print(f"--- {name} (exit {p.returncode}, {time.monotonic() - gone_at:.2f} s after the daemon went)\n"
                  f"{out}", file=sys.stderr)
            self.assertGreater(p.returncode, 0, f"{name}: an error exit, not success or a signal")
        return gone_at

    def test_rc_pingpong_sigterm(self):
        self.daemon_goes_under(["ibv_rc_pingpong", "-d", "uroce0", "-g", "2", "-n", "100000000"], signal.SIGTERM)

    def test_rc_pingpong_sigkill(self):
        self.daemon_goes_under(["ibv_rc_pingpong", "-d", "uroce0", "-g", "2", "-n", "100000000"], signal.SIGKILL)

    def test_rc_pingpong_with_events_sigterm(self):
        # Blocked in ibv_get_cq_event: the stopping daemon writes one event
        # on every channel, after hanging up.
        self.daemon_goes_under(["ibv_rc_pingpong", "-d", "uroce0", "-g", "2", "-e", "-n", "100000000"],
                               signal.SIGTERM)

    def test_rc_pingpong_with_events_sigkill(self):
        # Nobody but the provider's watcher thread writes the event.
        self.daemon_goes_under(["ibv_rc_pingpong", "-d", "uroce0", "-g", "2", "-e", "-n", "100000000"],
                               signal.SIGKILL)

    def test_ib_send_bw_with_events_sigkill(self):
        # perftest sleeps on events in its SEND test (ib_write_bw has no -e).
        self.daemon_goes_under(["ib_send_bw", "-d", "uroce0", "-x", "2", "-e", "-n", "100000000"], signal.SIGKILL)

    def test_ib_write_bw_sigkill(self):
        self.daemon_goes_under(["ib_write_bw", "-d", "uroce0", "-x", "2", "-n", "100000000"], signal.SIGKILL)


RING_VERSION = 3  # UROCE_RING_VERSION (emulator/abi/rings.h)
# Ring headers (abi/rings.h): three 64-byte lines, the fixed fields, then the
# producer alone, then the consumer and what its writer owns. Each layout is
# (offset, format) pieces read in order into one tuple.
RING_HEADER = 3 * 64
WQ_RING = ((0, "<5I"), (64, "<I"), (128, "<2I"), (20, "<I"))  # version, entries, stride, max_sge, max_inline, producer, consumer, armed, error
CQ_RING = ((0, "<2I"), (64, "<I"), (128, "<2I"), (8, "<I"))  # version, entries, producer, consumer, notify_request, overrun
SRQ_MAX_WR = 1


def read_ring(fd, size, offset, layout):
    """The ring header's fields; a work ring's doorbell_armed (which the
    daemon sets whenever it goes idle) reads as 0."""
    with mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ) as m:
        fields = sum((struct.unpack_from(fmt, m, offset + at) for at, fmt in layout), ())
    if layout is WQ_RING:
        fields = fields[:7] + (0,) + fields[8:]
    return fields


def writer_gone(read_fd):
    """Whether every write end of the pipe was closed (EOF at once)."""
    if not select.select([read_fd], [], [], 0)[0]:
        return False
    return os.read(read_fd, 8) == b""


class SharedRings(unittest.TestCase):
    """The rings uroced makes for CQs, QPs and SRQs (abi/rings.h), seen from
    a raw client of the control socket."""

    def setUp(self):
        self.d = Daemon()
        self.c = Client(self.d.socket)
        self.assertEqual(self.c.hello()[0], 0)
        self.pd = self.c.alloc_pd()[1]
        self.fds = []

    def tearDown(self):
        for fd in self.fds:
            os.close(fd)
        self.c.close()
        self.d.stop()

    def keep(self, fds):
        self.fds.extend(fds)
        return fds

    def test_cq_ring(self):
        status, cq, cqe, ring_bytes, fds = self.c.create_cq(100, cookie=0x1234)
        self.assertEqual(status, 0)
        self.assertEqual(cqe, 128)  # the next power of two
        self.assertEqual(ring_bytes, RING_HEADER + 128 * 64)
        self.assertEqual(len(self.keep(fds)), 1)
        self.assertEqual(os.fstat(fds[0]).st_size, ring_bytes)
        self.assertTrue(os.readlink(f"/proc/self/fd/{fds[0]}").startswith("/memfd:uroce-cq"))
        self.assertEqual(read_ring(fds[0], ring_bytes, 0, CQ_RING), (RING_VERSION, 128, 0, 0, 0, 0))
        self.assertEqual(self.c.create_cq(0)[0], EINVAL)
        self.assertEqual(self.c.call(DESTROY_CQ, struct.pack("<II", cq, 0))[0], 0)

    def test_cq_channel_fd(self):
        r, w = os.pipe()
        self.keep([r])
        status, cq, _cqe, _bytes, fds = self.c.create_cq(4, cookie=0xC0FFEE, channel_fd=w)
        self.keep(fds)
        self.assertEqual(status, 0)
        os.close(w)
        self.assertFalse(writer_gone(r), "the daemon keeps the channel's notify end")
        self.assertEqual(self.c.call(DESTROY_CQ, struct.pack("<II", cq, 0))[0], 0)
        self.assertTrue(writer_gone(r), "and closes it with the CQ")

    def test_cq_channel_fd_goes_with_the_client(self):
        r, w = os.pipe()
        self.keep([r])
        status, _cq, _cqe, _bytes, fds = self.c.create_cq(4, channel_fd=w)
        self.keep(fds)
        self.assertEqual(status, 0)
        os.close(w)
        self.c.close()
        deadline = time.monotonic() + 20
        while not writer_gone(r) and time.monotonic() < deadline:
            time.sleep(0.01)
        self.assertTrue(writer_gone(r))
        self.c = Client(self.d.socket)

    def test_cq_channel_fd_must_be_a_writable_pipe(self):
        self.assertEqual(self.c.create_cq(4, has_channel=1)[0], EINVAL)  # no fd
        self.assertEqual(self.c.create_cq(4, has_channel=2)[0], EINVAL)
        r, w = os.pipe()
        self.keep([r, w])
        self.assertEqual(self.c.create_cq(4, channel_fd=r)[0], EINVAL)  # the read end
        null = os.open("/dev/null", os.O_WRONLY)
        self.keep([null])
        self.assertEqual(self.c.create_cq(4, channel_fd=null)[0], EINVAL)  # not a pipe
        self.assertEqual(self.d.counts()["cqs"], 0)
        # An fd without has_channel is not kept.
        r2, w2 = os.pipe()
        self.keep([r2])
        status, _cq, _cqe, _bytes, fds = self.c.create_cq(4, channel_fd=w2, has_channel=0)
        self.keep(fds)
        self.assertEqual(status, 0)
        os.close(w2)
        self.assertTrue(writer_gone(r2))

    def test_qp_rings(self):
        _s, cq, _e, _b, fds = self.c.create_cq(16)
        self.keep(fds)
        status, qp, fds = self.c.create_qp(self.pd, cq, cq, cap=(5, 3, 2, 1, 40))
        self.assertEqual(status, 0)
        self.assertEqual(len(self.keep(fds)), 1)
        # Granted: ring entries (powers of two), SGEs and inline as asked.
        self.assertEqual(qp["cap"], (8, 4, 2, 1, 40))
        # SQ slot: 64 + max(2 * 16, 48) = 112 -> 128; RQ slot: 16 + 16.
        sq_bytes = RING_HEADER + 8 * 128
        self.assertEqual(qp["sq_offset"], 0)
        self.assertEqual(qp["rq_offset"], sq_bytes)  # already on a cache line
        self.assertEqual(qp["ring_bytes"], sq_bytes + RING_HEADER + 4 * 32)
        self.assertEqual(os.fstat(fds[0]).st_size, qp["ring_bytes"])
        self.assertEqual(read_ring(fds[0], qp["ring_bytes"], 0, WQ_RING), (RING_VERSION, 8, 128, 2, 40, 0, 0, 0, 0))
        self.assertEqual(read_ring(fds[0], qp["ring_bytes"], qp["rq_offset"], WQ_RING),
                         (RING_VERSION, 4, 32, 1, 0, 0, 0, 0, 0))
        # Beyond the device's limits: refused, no ring.
        self.assertEqual(self.c.create_qp(self.pd, cq, cq, cap=(1 << 20, 1, 1, 1, 0))[0], EINVAL)
        self.assertEqual(self.c.create_qp(self.pd, cq, cq, cap=(1, 1, 1, 1, 4096))[0], EINVAL)

    def test_qp_with_an_srq_has_no_rq_ring(self):
        _s, cq, _e, _b, fds = self.c.create_cq(16)
        self.keep(fds)
        status, srq, max_wr, max_sge, ring_bytes, fds = self.c.create_srq(self.pd, 100, 2, cookie=0x5)
        self.assertEqual(status, 0)
        self.keep(fds)
        self.assertEqual((max_wr, max_sge), (128, 2))
        self.assertEqual(ring_bytes, RING_HEADER + 128 * 48)
        self.assertEqual(read_ring(fds[0], ring_bytes, 0, WQ_RING), (RING_VERSION, 128, 48, 2, 0, 0, 0, 0, 0))
        status, qp, fds = self.c.create_qp(self.pd, cq, cq, srq=srq, cap=(4, 4, 1, 1, 0))
        self.keep(fds)
        self.assertEqual(status, 0)
        self.assertEqual(qp["rq_offset"], 0)
        self.assertEqual(qp["cap"][1], 0)  # max_recv_wr: the SRQ's
        self.assertEqual(qp["ring_bytes"], RING_HEADER + 4 * 128)
        # The SRQ ring was sized at creation: max_wr grows only within it.
        def modify(max_wr):
            return self.c.call(MODIFY_SRQ, struct.pack("<6IQQ", 0, srq, max_wr, 0, 0, SRQ_MAX_WR, 0, 0))[0]

        self.assertEqual(modify(256), EINVAL)
        self.assertEqual(modify(128), 0)

    def test_doorbell_is_one_eventfd_for_every_client(self):
        status, fds = self.c.doorbell()
        self.assertEqual(status, 0)
        self.assertEqual(len(self.keep(fds)), 1)
        self.assertEqual(os.readlink(f"/proc/self/fd/{fds[0]}"), "anon_inode:[eventfd]")
        other = Client(self.d.socket)
        other.hello()
        status, other_fds = other.doorbell()
        other.close()
        self.keep(other_fds)
        self.assertEqual(status, 0)
        # The same eventfd: the kernel names each one with an eventfd-id
        # (fdinfo). Writing one and reading the other would race with the
        # daemon, which drains its doorbell whenever it wakes.
        def eventfd_id(fd):
            with open(f"/proc/self/fdinfo/{fd}") as f:
                return next(line.split()[1] for line in f if line.startswith("eventfd-id:"))

        self.assertEqual(eventfd_id(fds[0]), eventfd_id(other_fds[0]))
        mine = os.eventfd(0)
        self.keep([mine])
        self.assertNotEqual(eventfd_id(mine), eventfd_id(fds[0]))  # the check can tell eventfds apart


def main():
    global UROCED, UROCE, BIN
    UROCED, UROCE, BIN = sys.argv[1:4]
    del sys.argv[1:4]
    if os.geteuid() != 0 and not os.path.lexists(NODE):
        print(f"SKIP: not root and {NODE} does not exist (see docs/daemon.md for the recipe)")
        return SKIP
    for tool in ("ibv_devices", "ibv_devinfo", "ibv_rc_pingpong", "ib_write_bw", "ib_send_bw", "stdbuf"):
        if shutil.which(tool) is None:
            print(f"SKIP: {tool} not installed (ibverbs-utils, perftest)")
            return SKIP
    prog = unittest.main(exit=False, verbosity=2)
    return 0 if prog.result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main())
