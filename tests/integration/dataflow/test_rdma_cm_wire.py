#!/usr/bin/env python3
"""Stock librdmacm programs between two uroced in two network namespaces,
connected by real IB CM MADs on QP1 (the wire CM, docs/rdma-cm.md "Over the
wire"): rping (data verified), ucmatose (10 connections), udaddy (SIDR),
ib_write_bw -R and ib_send_bw -R; a connect to a port nobody listens on is
REJECTED (REJ 8 from the peer daemon) in bounded time; and a capture of one
rping connection in the peer namespace holds REQ, REP, RTU, DREQ and DREP,
which `uroce decode` reads with good ICRCs.

usage: test_rdma_cm_wire.py UROCED UROCE
Exit 77 (skipped) when not root or rdmacm-utils / perftest / tshark missing.
"""

import json
import os
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import uroce_harness as harness  # noqa: E402

# The server starts first; the client is retried while it is rejected (the
# server does not listen yet: REJ 8), at most this long.
LISTEN_SECONDS = 15
RUN_SECONDS = 30
# A REJ from a live peer comes in one round trip; this bounds it generously.
REJECT_SECONDS = 5
REJECTED_SIGNS = ("REJECTED", "rejected", "Unexpected CM event bl blka 8", "UNREACHABLE, error: 1")


class WirePair:
    """A server in the first namespace, a client in the second, retried
    while refused; both stopped by PID whatever happens."""

    def __init__(self, topo, server_argv, client_argv):
        self.topo = topo
        self.server_log = tempfile.TemporaryFile(mode="w+")
        self.server = subprocess.Popen(topo.server.daemon.exec_argv(*server_argv), stdout=self.server_log,
                                       stderr=subprocess.STDOUT, text=True)
        self.client_argv = client_argv

    def run(self):
        deadline = time.monotonic() + LISTEN_SECONDS
        while True:
            try:
                c = subprocess.run(self.topo.client.daemon.exec_argv(*self.client_argv), capture_output=True,
                                   text=True, timeout=RUN_SECONDS)
                crc, cout = c.returncode, c.stdout + c.stderr
            except subprocess.TimeoutExpired as e:
                crc, cout = -9, f"client timed out after {RUN_SECONDS} s\n" + (e.stdout or b"").decode(errors="replace")
            rejected = any(s in cout for s in REJECTED_SIGNS)
            if crc == 0 or not rejected or time.monotonic() > deadline or self.server.poll() is not None:
                break
            time.sleep(0.05)
        try:
            self.server.wait(timeout=RUN_SECONDS)
        except subprocess.TimeoutExpired:
            self.server.kill()
            self.server.wait()
        self.server_log.seek(0)
        return crc, cout, self.server.returncode, self.server_log.read()

    def close(self):
        if self.server.poll() is None:
            self.server.kill()
            self.server.wait()
        self.server_log.close()


class RdmaCmOverTheWire(unittest.TestCase):
    topo = None
    uroce = None

    def pair(self, server_argv, client_argv):
        p = WirePair(self.topo, server_argv, client_argv)
        self.addCleanup(p.close)
        crc, cout, src, sout = p.run()
        why = f"client:\n{harness.tail(cout)}\nserver:\n{harness.tail(sout)}\n{self.topo.daemon_logs()}"
        self.assertEqual(crc, 0, why)
        self.assertEqual(src, 0, why)
        self.assertEqual(self.topo.dead_daemons(), [], why)
        return cout, sout

    def server_ip(self):
        return self.topo.net.ip[0]

    def rping(self, port, count=100, size=4096):
        args = ["-v", "-V", "-C", str(count), "-S", str(size), "-p", str(port)]
        cout, _ = self.pair(["rping", "-s", "-a", self.server_ip(), *args],
                            ["rping", "-c", "-a", self.server_ip(), *args])
        pings = [line for line in cout.splitlines() if line.startswith("ping data: rdma-ping-")]
        self.assertEqual(len(pings), count, harness.tail(cout))
        self.assertIn(f"rdma-ping-{count - 1}: ", pings[-1])

    def test_rping_moves_verified_data(self):
        self.rping(7174)

    def test_ucmatose_ten_connections(self):
        cout, sout = self.pair(["ucmatose", "-p", "7176", "-c", "10", "-C", "100"],
                               ["ucmatose", "-s", self.server_ip(), "-p", "7176", "-c", "10", "-C", "100"])
        self.assertIn("return status 0", cout)
        self.assertIn("disconnected", sout)

    def test_udaddy_over_sidr(self):
        cout, sout = self.pair(["udaddy"], ["udaddy", "-s", self.server_ip()])
        self.assertIn("return status 0", cout)
        self.assertIn("sending replies", sout)

    def test_perftest_with_rdma_cm(self):
        for tool in ("ib_write_bw", "ib_send_bw"):
            with self.subTest(tool=tool):
                server = [tool, "-R", "-d", self.topo.server.device, "-n", "1000", "-p", "18515"]
                client = [tool, "-R", "-d", self.topo.client.device, "-n", "1000", "-p", "18515", self.server_ip()]
                cout, _ = self.pair(server, client)
                self.assertIn("#bytes", cout)

    def test_connect_to_nobody_is_rejected_quickly(self):
        start = time.monotonic()
        r = subprocess.run(self.topo.client.daemon.exec_argv("rping", "-c", "-a", self.server_ip(), "-p", "7999",
                                                             "-C", "1"),
                           capture_output=True, text=True, timeout=RUN_SECONDS)
        took = time.monotonic() - start
        out = r.stdout + r.stderr
        self.assertNotEqual(r.returncode, 0, out)
        self.assertIn("REJECTED", out)
        self.assertLess(took, REJECT_SECONDS, out)
        start = time.monotonic()
        r = subprocess.run(self.topo.client.daemon.exec_argv("ucmatose", "-s", self.server_ip(), "-p", "7998"),
                           capture_output=True, text=True, timeout=RUN_SECONDS)
        out = r.stdout + r.stderr
        self.assertNotEqual(r.returncode, 0, out)
        self.assertIn("rejected", out.lower())
        self.assertLess(time.monotonic() - start, REJECT_SECONDS, out)

    def test_capture_holds_the_cm_exchange(self):
        ns, iface = self.topo.net.ns[1], self.topo.net.ifname[1]
        with tempfile.TemporaryDirectory() as tmp:
            pcap = os.path.join(tmp, "cm.pcap")
            err = open(os.path.join(tmp, "tshark.err"), "w+")
            tshark = subprocess.Popen(["ip", "netns", "exec", ns, "tshark", "-q", "-n", "-i", iface, "-F", "pcap",
                                       "-w", pcap, "-f", "udp dst port 4791"], stdout=subprocess.DEVNULL, stderr=err,
                                      stdin=subprocess.DEVNULL)
            try:
                self.wait_capturing(tshark, err)
                self.rping(7180, count=5, size=64)
                messages = self.wait_for_messages(pcap, {"REQ", "REP", "RTU", "DREQ", "DREP"})
            finally:
                if tshark.poll() is None:
                    tshark.terminate()
                    tshark.wait(timeout=30)
                err.close()
        for name in ("REQ", "REP", "RTU", "DREQ", "DREP"):
            self.assertIn(name, messages, messages)
        order = [m for m in messages if m in ("REQ", "REP", "RTU")]
        self.assertEqual(order[:3], ["REQ", "REP", "RTU"], messages)

    @staticmethod
    def wait_capturing(tshark, err):
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            err.seek(0)
            if "Capturing on" in err.read():
                time.sleep(0.5)  # the filter goes in just after the message
                return
            if tshark.poll() is not None:
                break
            time.sleep(0.05)
        err.seek(0)
        raise AssertionError(f"tshark did not start capturing: {err.read()}")

    def wait_for_messages(self, pcap, wanted, seconds=10):
        """The CM messages `uroce decode` reads in the capture, once every
        wanted one is there (tshark writes a little after the fact)."""
        deadline = time.monotonic() + seconds
        messages = []
        while time.monotonic() < deadline:
            if os.path.exists(pcap) and os.path.getsize(pcap) > 24:
                r = subprocess.run([self.uroce, "decode", "--json", pcap], capture_output=True, text=True, timeout=30)
                lines = [json.loads(line) for line in r.stdout.splitlines() if line.strip()]
                frames, totals = lines[:-1], lines[-1] if lines else {}
                messages = [f["cm"]["message"] for f in frames if "cm" in f and f["cm"].get("status") == "ok"]
                if wanted <= set(messages):
                    self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
                    self.assertEqual(totals.get("icrc_ok"), totals.get("roce"), totals)
                    return messages
            time.sleep(0.1)
        return messages


def main():
    harness.set_binaries(sys.argv[1], sys.argv[2])
    RdmaCmOverTheWire.uroce = os.path.abspath(sys.argv[2])
    tools = ["rping", "ucmatose", "udaddy", "ib_write_bw", "ib_send_bw", "tshark"]

    def suite(topo):
        RdmaCmOverTheWire.topo = topo
        return unittest.defaultTestLoader.loadTestsFromTestCase(RdmaCmOverTheWire)

    return harness.run_tests("veth", tools, suite)


if __name__ == "__main__":
    sys.exit(main())
