#!/usr/bin/env python3
"""The IPv4 TTL of the RoCE v2 frames uroce sends is the route's hop limit,
64, as rdma_rxe sends, whatever hop limit the program put in its address
(issue 14 item 3; docs/wire.md).

usage: test_wire_ttl.py UROCED UROCE

On the veth topology, tshark captures in the second namespace what arrives
on its end of the pair from the first namespace's uroced, while stock
ibv_rc_pingpong (which sets grh.hop_limit = 1) and ibv_ud_pingpong (also 1)
run between the two. Every RoCE frame from the first daemon's address must
carry TTL 64. Before the fix they carried 1, and could not cross a router.
"""

import os
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import uroce_harness as harness  # noqa: E402

ROUTE_HOP_LIMIT = 64
CAPTURE_READY_SECONDS = 30


class Capture:
    """tshark in namespace `ns` on `iface`, printing the source address, UDP
    destination port and TTL of each RoCE v2 frame and of the probes (UDP
    to PROBE_PORT) that show it is capturing."""

    PROBE_PORT = 4792

    def __init__(self, ns, iface):
        self.err = tempfile.TemporaryFile(mode="w+")
        self.out = tempfile.TemporaryFile(mode="w+")
        argv = ["ip", "netns", "exec", ns, "tshark", "-l", "-n", "-i", iface, "-f",
                f"udp dst port 4791 or udp dst port {self.PROBE_PORT}",
                "-T", "fields", "-e", "ip.src", "-e", "udp.dstport", "-e", "ip.ttl"]
        self.proc = subprocess.Popen(argv, stdout=self.out, stderr=self.err, stdin=subprocess.DEVNULL)

    def wait_capturing(self, probe_from_ns, probe_to):
        """Sends a UDP probe from namespace `probe_from_ns` to `probe_to`, again
        and again, until tshark prints it (bounded): tshark says "Capturing
        on" a little before its capture filter is in place."""
        deadline = time.monotonic() + CAPTURE_READY_SECONDS
        send = ("import socket; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); "
                f"s.sendto(b'probe', ('{probe_to}', {self.PROBE_PORT}))")
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                break
            subprocess.run(["ip", "netns", "exec", probe_from_ns, sys.executable, "-c", send], timeout=30,
                           capture_output=True)
            if any(port == self.PROBE_PORT for _src, port, _ttl in self.rows(all_ports=True)):
                return
            time.sleep(0.05)
        self.err.seek(0)
        raise AssertionError(f"tshark did not capture its probe within {CAPTURE_READY_SECONDS} s: {self.err.read()}")

    def rows(self, all_ports=False):
        """[(source, UDP port, TTL)] printed so far; RoCE v2 frames only unless all_ports."""
        self.out.seek(0)
        rows = [line.split("\t") for line in self.out.read().splitlines() if line.count("\t") == 2]
        rows = [(src, int(port), int(ttl)) for src, port, ttl in rows if port and ttl]
        return rows if all_ports else [r for r in rows if r[1] == 4791]

    def wait_for(self, source, seconds=10):
        """Waits (bounded) until a frame from `source` has been printed: tshark
        reports what it captured a little after the programs finish."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline and not any(src == source for src, _port, _ttl in self.rows()):
            time.sleep(0.05)

    def stop(self):
        """Stops tshark (by its PID) and returns [(source, ttl)]."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.rows()


class WireTtlTests(unittest.TestCase):
    topo = None  # set by make_suite

    def check_program(self, program, extra):
        topo = self.topo
        capture = Capture(topo.net.ns[1], topo.net.ifname[1])
        try:
            capture.wait_capturing(topo.net.ns[0], topo.net.ip[1])
            port = harness.free_tcp_port()
            common = ["-g", str(topo.server.gid_index), "-p", str(port), "-n", "20", "-c", *extra]
            server = [program, "-d", topo.server.device, *common]
            client = [program, "-d", topo.client.device, *common, topo.server.tcp_host]
            result = harness.run_pair(topo, server, client, port, timeout=60)
            self.assertTrue(result.ok(), f"{result.summary()}\n{result.describe()}")
            capture.wait_for(topo.net.ip[0])
        finally:
            frames = capture.stop()
        from_server = [ttl for src, _port, ttl in frames if src == topo.net.ip[0]]
        sys.stderr.write(f"    {program}: {len(from_server)} frames from {topo.net.ip[0]}, TTLs "
                         f"{sorted(set(from_server))}\n")
        self.assertGreater(len(from_server), 0, f"no RoCE frame from {topo.net.ip[0]} captured")
        self.assertEqual(set(from_server), {ROUTE_HOP_LIMIT})

    def test_rc_pingpong_frames_carry_ttl_64(self):
        self.check_program("ibv_rc_pingpong", ["-s", "64", "-m", str(self.topo.server.mtu)])

    def test_ud_pingpong_frames_carry_ttl_64(self):
        self.check_program("ibv_ud_pingpong", ["-s", "64"])


def make_suite(topo):
    WireTtlTests.topo = topo
    loader = unittest.TestLoader()
    return unittest.TestSuite(WireTtlTests(n) for n in loader.getTestCaseNames(WireTtlTests))


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    harness.set_binaries(sys.argv[1], sys.argv[2])
    return harness.run_tests("veth", ["ibv_rc_pingpong", "ibv_ud_pingpong", "tshark"], make_suite)


if __name__ == "__main__":
    sys.exit(main())
