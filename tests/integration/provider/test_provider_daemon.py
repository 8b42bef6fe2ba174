#!/usr/bin/env python3
"""Stock libibverbs programs against a running uroced, through the provider.

usage: test_provider_daemon.py UROCED UROCE DIR_OF_C_TESTS [--preload LIBS]

Starts `uroced --port loopback --ip 192.0.2.1 --state-dir TMP` (as root it
makes /dev/infiniband/uverbs_uroce0 itself) and runs every program with
`uroce exec --state-dir TMP --`: ibv_devices, ibv_devinfo -v, the C programs
mr_rules, qp_states, daemon_gone (built by meson beside this file),
ibv_rc_pingpong and ib_write_bw up to their first data-path step. Exit 77
(skipped) when the device node cannot be made (not root).
"""

import os
import re
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "daemon"))
from uroce_control import Client  # noqa: E402

UROCED = UROCE = BIN = None
SKIP = 77
NODE = "/dev/infiniband/uverbs_uroce0"
CREATE_CQ, DESTROY_CQ, CREATE_QP = 15, 16, 17
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
        self.proc = subprocess.Popen([UROCED, "--port", "loopback", "--ip", "192.0.2.1", "--state-dir", self.state],
                                     stderr=self.log)
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
                        r"atomic_cap:\s*ATOMIC_HCA \(1\)", r"max_qp_rd_atom:\s*16", r"num_comp_vectors:\s*1"]:
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
        status, body, fds = c.call(CREATE_CQ, struct.pack("<II", 16, 0))
        self.assertEqual(status, 0)
        self.assertEqual(len(fds), 1)  # the CQ ring
        os.close(fds[0])
        cq = struct.unpack_from("<I", body)[0]
        create_qp = struct.pack("<IIII BB6x 6I", pd, cq, cq, 0, 2, 0, 4, 4, 1, 1, 0, 0)
        status, body, _ = c.call(CREATE_QP, create_qp)
        self.assertEqual(status, 0)
        # Another client cannot name them.
        other = Client(self.d.socket)
        self.assertEqual(other.call(DESTROY_CQ, struct.pack("<II", cq, 0))[0], EINVAL)
        self.assertEqual(other.call(CREATE_QP, create_qp)[0], EINVAL)
        other.close()
        self.assertEqual(self.d.counts(), {"cqs": 1, "qps": 1, "srqs": 0, "ahs": 0})
        before = self.d.status()["objects_reclaimed"]
        c.close()
        deadline = time.monotonic() + 20
        while self.d.counts()["qps"] != 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        self.assertEqual(self.d.counts(), {"cqs": 0, "qps": 0, "srqs": 0, "ahs": 0})
        self.assertGreaterEqual(self.d.status()["objects_reclaimed"] - before, 3)  # QP, CQ, PD

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


def main():
    global UROCED, UROCE, BIN
    UROCED, UROCE, BIN = sys.argv[1:4]
    del sys.argv[1:4]
    if os.geteuid() != 0 and not os.path.lexists(NODE):
        print(f"SKIP: not root and {NODE} does not exist (see docs/daemon.md for the recipe)")
        return SKIP
    for tool in ("ibv_devices", "ibv_devinfo", "ibv_rc_pingpong", "ib_write_bw", "stdbuf"):
        if shutil.which(tool) is None:
            print(f"SKIP: {tool} not installed (ibverbs-utils, perftest)")
            return SKIP
    prog = unittest.main(exit=False, verbosity=2)
    return 0 if prog.result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main())
