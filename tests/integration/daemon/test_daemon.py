"""uroced as a client sees it: the published tree, the control protocol, hostile
clients, clients killed mid-registration, shutdown, and the daemon's life
cycle (one daemon per state directory and name, what a SIGKILL leaves and the
next start removes, nothing left after a stop, a device node shared by two
daemons of one name in two network namespaces).

usage: test_daemon.py UROCED UROCE
"""

import ctypes
import glob
import os
import signal
import struct
import subprocess
import sys
import tempfile
import time
import unittest

from uroce_control import (ALLOC_PD, CREATE_RELAXED_POOL, FLUSH_RELAXED, HDR, MAGIC, STATUS, VERSION, Client)

UROCED = UROCE = None


def sanitizer_preload_env():
    """The environment for an uninstrumented program (ibv_devinfo) that loads
    this build's provider: in a sanitizer build the provider needs its
    runtimes loaded first (LD_PRELOAD), as the provider tests do."""
    provider = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(UROCED)))),
                            "verbs_provider", "liburoce-rdmav34.so")
    env = dict(os.environ)
    try:
        out = subprocess.run(["ldd", provider], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.TimeoutExpired):
        return env
    runtimes = [line.split("=>")[1].split("(")[0].strip() for line in out.splitlines()
                if "=>" in line and any(f"lib{s}san.so" in line for s in ("a", "ub", "t"))]
    if runtimes:
        # `uroce exec` puts its own preload library first; the runtimes still
        # load before the program's libraries, which is all ASan needs.
        env["LD_PRELOAD"] = ":".join(runtimes)
        env["ASAN_OPTIONS"] = "verify_asan_link_order=0:detect_leaks=0"
    return env

LOCAL_WRITE, REMOTE_WRITE, REMOTE_READ = 1, 2, 4
EINVAL = 22


class Daemon:
    """One uroced on the loopback port, in its own state directory."""

    def __init__(self, *extra, name="uroce0", state=None, log_dir=None):
        """A new state directory unless `state` is given; the log goes to
        `log_dir` (default: the state directory)."""
        self.tmp = tempfile.TemporaryDirectory(prefix="uroced-test-") if state is None else None
        self.state = self.tmp.name if state is None else state
        self.log = open(os.path.join(log_dir or self.state, "uroced.log"), "a+")
        self.proc = subprocess.Popen([UROCED, "--port", "loopback", "--ip", "192.0.2.1", "--ip", "2001:db8::7",
                                      "--state-dir", self.state, "--name", name, *extra], stderr=self.log)
        r = subprocess.run([UROCE, "status", "--state-dir", self.state, "--device", name, "--wait", "20"],
                           capture_output=True, text=True, timeout=30)
        if r.returncode != 0:
            self.stop()
            raise RuntimeError(f"uroced did not become ready: {r.stderr}\n{self.log_text()}")
        self.socket = os.path.join(self.state, name + ".sock")

    def log_text(self):
        self.log.flush()
        with open(self.log.name) as f:
            return f.read()

    def client(self):
        return Client(self.socket)

    def status(self):
        c = self.client()
        try:
            return c.status()
        finally:
            c.close()

    def wait_for(self, predicate, what, seconds=30):
        """Polls the daemon's counters until predicate holds (bounded)."""
        deadline = time.monotonic() + seconds
        while True:
            s = self.status()
            if predicate(s):
                return s
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what}: {s}")
            time.sleep(0.01)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(timeout=30)
        self.log.close()
        if self.tmp is not None:
            self.tmp.cleanup()


class TreeTests(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.d = Daemon()

    @classmethod
    def tearDownClass(cls):
        cls.d.stop()

    def read(self, rel):
        with open(os.path.join(self.d.state, "sys", rel)) as f:
            return f.read().strip()

    def test_tree(self):
        self.assertEqual(self.read("class/infiniband_verbs/abi_version"), "6")
        self.assertEqual(self.read("class/infiniband_verbs/uverbs_uroce0/ibdev"), "uroce0")
        self.assertEqual(self.read("class/infiniband_verbs/uverbs_uroce0/dev"), "0:0")
        dev = "class/infiniband/uroce0/"
        self.assertEqual(self.read(dev + "node_type"), "1: CA")
        self.assertEqual(self.read(dev + "ports/1/pkeys/0"), "0xffff")
        self.assertEqual(self.read(dev + "uroce_control_socket"), self.d.socket)
        gids = [self.read(dev + f"ports/1/gids/{i}") for i in range(16)]
        types = [self.read(dev + f"ports/1/gid_attrs/types/{i}") for i in range(16)]
        self.assertTrue(gids[0].startswith("fe80:0000:0000:0000:"))
        self.assertEqual((gids[1], types[0], types[1]), (gids[0], "IB/RoCE v1", "RoCE v2"))
        self.assertEqual(gids[2], "0000:0000:0000:0000:0000:ffff:c000:0201")
        self.assertEqual(types[2], "RoCE v2")
        self.assertEqual(gids[3], "2001:0db8:0000:0000:0000:0000:0000:0007")
        self.assertEqual(gids[4:], ["0000:0000:0000:0000:0000:0000:0000:0000"] * 12)
        # Unused slots read as libibverbs takes a kernel device's EINVAL there,
        # so the zero GID makes ibv_query_gid_ex ENODATA (sysfs_tree.cc).
        self.assertEqual(types[4:], ["IB/RoCE v1"] * 12)
        # The MAC-derived interface identifier is the modified EUI-64 of the port's MAC.
        r = subprocess.run([UROCE, "status", "--state-dir", self.d.state], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        mac = r.stdout.split("MAC ")[1].split(",")[0].split(":")
        eui = [int(mac[0], 16) ^ 2, int(mac[1], 16), int(mac[2], 16), 0xFF, 0xFE] + [int(x, 16) for x in mac[3:]]
        self.assertEqual(gids[0][20:].replace(":", ""), "".join(f"{b:02x}" for b in eui))
        self.assertIn("PORT_ACTIVE", r.stdout)
        self.assertIn("active MTU 4096", r.stdout)  # loopback's default 9000-byte MTU


class ProtocolTests(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.d = Daemon()

    @classmethod
    def tearDownClass(cls):
        cls.d.stop()

    def test_registration_rules_and_isolation(self):
        buf = ctypes.create_string_buffer(1 << 16)
        addr = ctypes.addressof(buf)
        a, b = self.d.client(), self.d.client()
        try:
            self.assertEqual(a.hello()[0], 0)
            status, pd = a.alloc_pd()
            self.assertEqual(status, 0)
            status, keys = a.reg_mr(pd, addr, len(buf), LOCAL_WRITE | REMOTE_WRITE)
            self.assertEqual(status, 0)
            lkey, rkey = keys
            self.assertEqual(lkey, rkey)
            # ibv_reg_mr(3): remote write needs local write.
            self.assertEqual(a.reg_mr(pd, addr, len(buf), REMOTE_WRITE)[0], EINVAL)
            self.assertEqual(a.reg_mr(pd, addr, len(buf), 1 << 12)[0], EINVAL)  # unknown flag
            self.assertEqual(a.reg_mr(pd, addr, 0, LOCAL_WRITE)[0], EINVAL)
            # Another client cannot name a's objects.
            self.assertEqual(b.dereg_mr(lkey), EINVAL)
            self.assertEqual(b.dealloc_pd(pd), EINVAL)
            self.assertEqual(b.reg_mr(pd, addr, len(buf), LOCAL_WRITE)[0], EINVAL)
            self.assertEqual(a.dealloc_pd(pd), 16)  # EBUSY: the MR uses it
            self.assertEqual(a.dereg_mr(lkey), 0)
            self.assertEqual(a.dereg_mr(lkey), EINVAL)
            self.assertEqual(a.dealloc_pd(pd), 0)
        finally:
            a.close()
            b.close()

    def test_unmapped_memory_is_efault(self):
        c = self.d.client()
        try:
            _, pd = c.alloc_pd()
            self.assertEqual(c.reg_mr(pd, 0x10, 4096, LOCAL_WRITE)[0], 14)  # EFAULT
        finally:
            c.close()


class HostileClientTests(unittest.TestCase):
    """Garbage on the control socket ends that connection, never the daemon."""

    @classmethod
    def setUpClass(cls):
        cls.d = Daemon()

    @classmethod
    def tearDownClass(cls):
        cls.d.stop()

    def send_and_expect_drop(self, payload, fds=None):
        c = self.d.client()
        try:
            if fds:
                import array
                import socket
                c.sock.sendmsg([payload], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))])
            else:
                c.sock.send(payload)
            self.assertEqual(c.sock.recv(1024), b"", "the daemon must close a connection that sent garbage")
        finally:
            c.close()

    def test_garbage_is_dropped_and_counted(self):
        good = self.d.client()
        _, pd = good.alloc_pd()
        before = self.d.status()["bad_messages"]
        hdr = lambda op, length, magic=MAGIC, version=VERSION: HDR.pack(magic, version, op, length, 1, 0, 0)
        cases = [
            os.urandom(100),                                   # random bytes
            b"\x01\x02\x03",                                   # shorter than a header
            hdr(STATUS, 24)[:20],                              # truncated header
            hdr(STATUS, 600) + bytes(576),                     # longer than any message
            hdr(STATUS, 24, magic=0xDEADBEEF),                 # bad magic
            hdr(STATUS, 24, version=99),                       # bad version
            hdr(999, 24),                                      # unknown operation
            hdr(ALLOC_PD, 40) ,                                # length field disagrees with the datagram
            hdr(ALLOC_PD, 32) + bytes(8),                      # right length field, wrong size for the op
        ]
        for payload in cases:
            with self.subTest(payload=payload[:24].hex()):
                self.send_and_expect_drop(payload)
        r, w = os.pipe()
        self.send_and_expect_drop(hdr(STATUS, 24), fds=[r, w, r])  # more fds than any request carries
        os.close(r)
        os.close(w)
        for _ in range(200):
            self.send_and_expect_drop(os.urandom(1 + os.urandom(1)[0] * 2))
        after = self.d.wait_for(lambda s: s["bad_messages"] >= before + len(cases) + 1 + 200, "bad messages counted")
        self.assertEqual(after["bad_messages"], before + len(cases) + 1 + 200)
        # The well-behaved client was served all along.
        self.assertEqual(good.dealloc_pd(pd), 0)
        good.close()
        self.assertIsNone(self.d.proc.poll(), "uroced must still be running")


    def test_fds_on_an_empty_message_are_closed(self):
        # Found by fuzz_control: an empty datagram reads as the end of the
        # connection, and the daemon used to keep the fds it carried.
        fd_dir = f"/proc/{self.d.proc.pid}/fd"
        before = len(os.listdir(fd_dir))
        memfd = os.memfd_create("empty-message")
        for _ in range(20):
            self.send_and_expect_drop(b"", fds=[memfd])
        os.close(memfd)
        deadline = time.monotonic() + 30  # connections of earlier tests may still be closing
        while len(os.listdir(fd_dir)) > before and time.monotonic() < deadline:
            time.sleep(0.01)
        self.assertLessEqual(len(os.listdir(fd_dir)), before, "the daemon kept fds of empty messages")


class HostileSharedMemoryTests(unittest.TestCase):
    """Garbage written into shared memory the daemon reads (the relaxed-MR
    pool) while the daemon sweeps it on its timer: it keeps serving."""

    @classmethod
    def setUpClass(cls):
        cls.d = Daemon()

    @classmethod
    def tearDownClass(cls):
        cls.d.stop()

    def test_garbage_in_the_relaxed_pool(self):
        import mmap
        capacity = 256
        c = self.d.client()
        _, pd = c.alloc_pd()
        status, body, fds = c.call(CREATE_RELAXED_POOL, struct.pack("<IIII", pd, capacity, 4, 1000))
        self.assertEqual(status, 0)
        self.assertEqual(len(fds), 1, "the pool's memory comes as an fd")
        handle = struct.unpack_from("<I", body)[0]
        size = 64 + 64 * capacity
        mem = mmap.mmap(fds[0], size)
        with self.assertRaises(PermissionError, msg="the pool is sealed at its size"):
            os.ftruncate(fds[0], 0)  # would make the daemon's next sweep a SIGBUS
        os.close(fds[0])
        other = self.d.client()
        # Bounded: 2000 rounds of random bytes over the whole pool, the daemon
        # sweeping it every 1 ms meanwhile; every 100 rounds another client
        # must still be served, and slot states are forced to "deregistered"
        # so the sweeps really walk through the garbage.
        for i in range(2000):
            mem[:] = os.urandom(size)
            for slot in range(capacity):
                mem[64 + slot * 64] = 3  # UROCE_RELAXED_DEREGISTERED, garbage elsewhere
            if i % 100 == 0:
                self.assertIsNone(self.d.proc.poll(), "uroced must still be running")
                self.assertEqual(other.alloc_pd()[0], 0)
        self.assertEqual(c.call(FLUSH_RELAXED, struct.pack("<II", handle, 0))[0], 0)
        self.assertEqual(self.d.status()["relaxed_pools"], 1)
        mem.close()
        c.close()
        other.close()
        self.d.wait_for(lambda s: s["relaxed_pools"] == 0 and s["clients"] == 1, "the pool destroyed with its client")
        self.assertIsNone(self.d.proc.poll())


class KilledClientTests(unittest.TestCase):
    CYCLES = 1000

    @classmethod
    def setUpClass(cls):
        cls.d = Daemon()

    @classmethod
    def tearDownClass(cls):
        cls.d.stop()

    def test_killed_mid_registration_leaks_nothing(self):
        buf = ctypes.create_string_buffer(1 << 20)
        addr = ctypes.addressof(buf)
        before = self.d.status()
        for i in range(self.CYCLES):
            r, w = os.pipe()
            pid = os.fork()
            if pid == 0:
                os.close(r)
                try:
                    c = Client(self.d.socket)
                    c.hello()
                    _, pd = c.alloc_pd()
                    n = 0
                    while True:
                        status, _keys = c.reg_mr(pd, addr + (n % 256) * 4096, 4096, LOCAL_WRITE | REMOTE_READ)
                        n += 1
                        if n == 1 + i % 7:
                            os.write(w, b"x")  # registered at least once: kill me now
                finally:
                    os._exit(1)
            os.close(w)
            self.assertEqual(os.read(r, 1), b"x")
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            os.close(r)
        # The client asking for the status is the one still connected.
        after = self.d.wait_for(lambda s: s["clients"] == 1 and s["clients_closed"] >= before["clients_closed"] +
                                self.CYCLES, "every killed client reclaimed")
        self.assertEqual((after["pds"], after["mrs"], after["mws"]), (0, 0, 0))
        self.assertGreaterEqual(after["objects_reclaimed"] - before["objects_reclaimed"], 2 * self.CYCLES)
        self.assertEqual(after["bad_messages"], before["bad_messages"], "a killed client is not a misbehaving one")
        # Still serving.
        c = self.d.client()
        self.assertEqual(c.alloc_pd()[0], 0)
        c.close()


class ShutdownTests(unittest.TestCase):
    def test_sigterm_tells_clients_device_fatal(self):
        d = Daemon()
        try:
            c = d.client()
            status, _client_id, fds = c.hello()
            self.assertEqual(status, 0)
            self.assertEqual(len(fds), 1, "HELLO passes the async-event fd")
            d.proc.send_signal(signal.SIGTERM)
            record = os.read(fds[0], 16)
            element, event_type, _reserved = struct.unpack("<QII", record)
            self.assertEqual(event_type, 8)  # IBV_EVENT_DEVICE_FATAL
            self.assertEqual(d.proc.wait(timeout=30), 0)
            with self.assertRaises((ConnectionError, OSError)):
                c.alloc_pd()
            c.close()
            os.close(fds[0])
            self.assertFalse(os.path.exists(os.path.join(d.state, "sys/class/infiniband/uroce0")))
            self.assertFalse(os.path.exists(d.socket))
        finally:
            d.stop()


NODE_DIR = "/dev/infiniband"


def node_entries(name):
    """The device node of `name` and its owner files and marker (device_node.h)."""
    return sorted(e for e in os.listdir(NODE_DIR) if e == f"uverbs_{name}" or e.startswith(f".uverbs_{name}.")) \
        if os.path.isdir(NODE_DIR) else []


def state_entries(state):
    """What is in a state directory besides the test's own log."""
    return sorted(e for e in os.listdir(state) if e != "uroced.log")


def unique_name(tag):
    """A device name no other test (or concurrent run) uses."""
    return f"uroce_{tag}{os.getpid()}"


class LifecycleTests(unittest.TestCase):
    def test_second_daemon_on_the_same_state_dir_is_refused(self):
        d = Daemon(name=unique_name("two"))
        try:
            name = unique_name("two")
            r = subprocess.run([UROCED, "--port", "loopback", "--ip", "192.0.2.9", "--state-dir", d.state, "--name",
                                name], capture_output=True, text=True, timeout=30)
            self.assertEqual(r.returncode, 1, r.stderr)
            self.assertIn(f"another uroced (pid {d.proc.pid}) is serving {name} from {d.state}", r.stderr)
            # The first keeps its socket, its tree and its clients.
            self.assertEqual(d.status()["clients"], 1)
            self.assertIsNone(d.proc.poll())
            with open(os.path.join(d.state, "sys/class/infiniband", name, "ports/1/gids/2")) as f:
                self.assertEqual(f.read().strip(), "0000:0000:0000:0000:0000:ffff:c000:0201")  # 192.0.2.1, not .9
            # Another name on the same state directory is another device.
            other = Daemon(name=unique_name("three"), state=d.state, log_dir=d.state)
            other.stop()
            self.assertIn(name, os.listdir(os.path.join(d.state, "sys/class/infiniband")))
        finally:
            d.stop()

    def test_sigkill_leftovers_are_removed_by_the_next_start_and_a_stop_leaves_nothing(self):
        name = unique_name("kill")
        with tempfile.TemporaryDirectory(prefix="uroced-test-") as state:
            d = Daemon(name=name, state=state)
            d.proc.send_signal(signal.SIGKILL)
            d.proc.wait(timeout=30)
            d.stop()
            left = state_entries(state)
            self.assertEqual(left, sorted([f"{name}.lock", f"{name}.sock", "sys"]))
            r = subprocess.run([UROCE, "status", "--state-dir", state, "--device", name], capture_output=True,
                               text=True, timeout=30)
            self.assertEqual(r.returncode, 1)
            self.assertIn("did not stop cleanly", r.stderr)
            if os.geteuid() == 0:
                self.assertIn(f"uverbs_{name}", node_entries(name))
            again = Daemon(name=name, state=state)
            try:
                self.assertIn("did not stop cleanly", again.log_text())
                self.assertEqual(again.status()["clients"], 1)
                if os.geteuid() == 0:
                    # The dead daemon's owner file went; ours is the only one.
                    owners = [e for e in node_entries(name) if ".owner-" in e]
                    self.assertEqual(len(owners), 1, node_entries(name))
            finally:
                again.stop()
            self.assertEqual(state_entries(state), [])
            self.assertEqual(node_entries(name), [])

    @unittest.skipUnless(os.geteuid() == 0, "needs root for /dev/infiniband and network namespaces")
    def test_same_name_in_two_namespaces_stops_in_either_order(self):
        name = unique_name("ns")
        namespaces = [f"uroce-lc-{os.getpid()}-{i}" for i in range(2)]
        for ns in namespaces:
            subprocess.run(["ip", "netns", "add", ns], check=True)
            self.addCleanup(subprocess.run, ["ip", "netns", "del", ns])
        for first, second in ((0, 1), (1, 0)):
            with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
                states = [a, b]
                daemons = []
                for ns, st in zip(namespaces, states):
                    daemons.append(subprocess.Popen(["ip", "netns", "exec", ns, UROCED, "--port", "loopback", "--ip",
                                                     "192.0.2.1", "--state-dir", st, "--name", name],
                                                    stderr=subprocess.DEVNULL))
                    self.addCleanup(lambda p=daemons[-1]: p.poll() is None and p.kill())
                    r = subprocess.run([UROCE, "status", "--state-dir", st, "--device", name, "--wait", "20"],
                                       capture_output=True, text=True, timeout=30)
                    self.assertEqual(r.returncode, 0, r.stderr)
                daemons[first].send_signal(signal.SIGTERM)
                self.assertEqual(daemons[first].wait(timeout=30), 0)
                # The other's clients still find the device.
                self.assertIn(f"uverbs_{name}", node_entries(name))
                r = subprocess.run([UROCE, "exec", "--state-dir", states[second], "--", "ibv_devinfo", "-d", name],
                                   capture_output=True, text=True, timeout=30, env=sanitizer_preload_env())
                self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
                self.assertIn("PORT_ACTIVE", r.stdout)
                daemons[second].send_signal(signal.SIGTERM)
                self.assertEqual(daemons[second].wait(timeout=30), 0)
                self.assertEqual(node_entries(name), [], f"stopping {first} then {second}")


@unittest.skipUnless(os.geteuid() == 0, "needs root to create a network namespace and a veth pair")
class DpdkPortTests(unittest.TestCase):
    """uroced on a real DPDK port: net_af_packet on one end of a veth pair in
    a network namespace this test creates (and removes)."""

    def setUp(self):
        self.ns = f"uroce-t{os.getpid()}"
        subprocess.run(["ip", "netns", "add", self.ns], check=True)
        self.addCleanup(subprocess.run, ["ip", "netns", "del", self.ns])
        ns = ["ip", "netns", "exec", self.ns]
        subprocess.run(ns + ["ip", "link", "add", "ur0", "type", "veth", "peer", "name", "ur1"], check=True)
        subprocess.run(ns + ["ip", "link", "set", "ur0", "mtu", "9000", "up"], check=True)
        subprocess.run(ns + ["ip", "link", "set", "ur1", "mtu", "9000", "up"], check=True)
        with open(f"/tmp/.{self.ns}-mac", "w") as f:
            subprocess.run(ns + ["cat", "/sys/class/net/ur0/address"], stdout=f, check=True)
        with open(f"/tmp/.{self.ns}-mac") as f:
            self.mac = f.read().strip()
        os.unlink(f"/tmp/.{self.ns}-mac")

    def start(self, state, log, name="uroce7"):
        proc = subprocess.Popen(["ip", "netns", "exec", self.ns, UROCED, "--port", "net_af_packet0,iface=ur0",
                                 "--ip", "10.99.0.1", "--state-dir", state, "--name", name], stderr=log)
        r = subprocess.run([UROCE, "status", "--state-dir", state, "--device", name, "--wait", "60"],
                           capture_output=True, text=True, timeout=90)
        log.seek(0)
        if r.returncode != 0:
            proc.kill()
            proc.wait()
        self.assertEqual(r.returncode, 0, r.stderr + log.read())
        return proc, r.stdout

    def test_af_packet_port(self):
        with tempfile.TemporaryDirectory() as st:
            log = open(os.path.join(st, "uroced.log"), "w+")
            proc, status = self.start(st, log)
            try:
                # The port's own MAC and MTU: 9000 gives an active IB MTU of 4096.
                self.assertIn(f"MAC {self.mac},", status)
                self.assertIn("active MTU 4096", status)
                self.assertIn("0000:0000:0000:0000:0000:ffff:0a63:0001  RoCE v2", status)
            finally:
                proc.send_signal(signal.SIGTERM)
                self.assertEqual(proc.wait(timeout=60), 0)
                log.close()
            self.assertEqual(state_entries(st), [])

    def test_af_packet_sigkill_then_restart_then_stop_leaves_nothing(self):
        name = unique_name("dpdk")
        dpdk_dirs = f"/var/run/dpdk/uroce-{name}-*"
        with tempfile.TemporaryDirectory() as st, open(os.path.join(st, "uroced.log"), "w+") as log:
            proc, _ = self.start(st, log, name)
            self.assertEqual(len(glob.glob(dpdk_dirs)), 1, "the EAL's runtime directory, named by the instance")
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=30)
            self.assertEqual(len(glob.glob(dpdk_dirs)), 1)
            self.assertIn(f"uverbs_{name}", node_entries(name))
            proc, _ = self.start(st, log, name)
            proc.send_signal(signal.SIGTERM)
            self.assertEqual(proc.wait(timeout=60), 0)
            log.seek(0)
            self.assertIn("did not stop cleanly", log.read())
            self.assertEqual(glob.glob(dpdk_dirs), [])
            self.assertEqual(state_entries(st), [])
            self.assertEqual(node_entries(name), [])


class BadConfigurationTests(unittest.TestCase):
    def run_uroced(self, *args):
        with tempfile.TemporaryDirectory() as st:
            return subprocess.run([UROCED, "--state-dir", st, *args], capture_output=True, text=True, timeout=30)

    def test_missing_dpdk_port_is_refused_clearly(self):
        r = self.run_uroced("--port", "net_af_packet0,iface=uroce-no-such-if", "--ip", "192.0.2.1")
        self.assertEqual(r.returncode, 1)
        self.assertIn("net_af_packet0,iface=uroce-no-such-if", r.stderr)

    def test_bad_arguments_are_refused_clearly(self):
        r = self.run_uroced("--port", "loopback", "--ip", "300.1.2.3")
        self.assertEqual(r.returncode, 2)
        self.assertIn("not an IPv4 or IPv6 address", r.stderr)
        r = self.run_uroced("--port", "loopback", "--ip", "192.0.2.1", "--name", "mlx5_0")
        self.assertEqual(r.returncode, 2)
        self.assertIn("must start with 'uroce'", r.stderr)
        r = self.run_uroced("--ip", "192.0.2.1")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("--port", r.stderr)
        r = self.run_uroced("--port", "loopback", "--ip", "192.0.2.1", "--mtu", "100")
        self.assertNotEqual(r.returncode, 0)


if __name__ == "__main__":
    UROCED, UROCE = sys.argv[1], sys.argv[2]
    unittest.main(argv=[sys.argv[0], "-v"])
