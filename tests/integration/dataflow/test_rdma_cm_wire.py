#!/usr/bin/env python3
"""Stock librdmacm programs between two uroced in two network namespaces,
connected by real IB CM MADs on QP1 (the wire CM, docs/rdmacm-device.md "Over the
wire"): rping (data verified), ucmatose (10 connections), udaddy (SIDR),
ib_write_bw -R and ib_send_bw -R; a connect to a port nobody listens on is
REJECTED (REJ 8 from the peer daemon), and a udaddy there UNREACHABLE with
SIDR status 1, in bounded time; and a capture of one
rping connection in the peer namespace holds REQ, REP, RTU, DREQ and DREP,
which `uroce decode` reads with good ICRCs.

usage: test_rdma_cm_wire.py UROCED UROCE
Exit 77 (skipped) when not root or rdmacm-utils / perftest / tshark missing.
"""

import errno
import json
import os
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import uroce_harness as harness  # noqa: E402
from rdma_cm_pair import CmPair, cm_ids  # noqa: E402

RUN_SECONDS = 30
# A REJ from a live peer comes in one round trip; this bounds it generously.
REJECT_SECONDS = 5


class RdmaCmOverTheWire(unittest.TestCase):
    topo = None
    uroce = None

    def pair(self, server_argv, client_argv, port, **kw):
        """Runs the server in the first namespace and, once the first daemon
        lists its id in LISTEN on `port`, the client in the second
        (rdma_cm_pair.CmPair)."""
        p = CmPair(self.topo.server, self.topo.client, server_argv, client_argv, port,
                   run_seconds=kw.pop("run_seconds", RUN_SECONDS), **kw)
        self.addCleanup(p.close)
        crc, cout, src, sout = p.run()
        why = f"{p.describe(cout, sout)}\n{self.topo.daemon_logs()}"
        self.assertEqual(crc, 0, why)
        self.assertEqual(src, 0, why)
        self.assertEqual(self.topo.dead_daemons(), [], why)
        return cout, sout

    def server_ip(self):
        return self.topo.net.ip[0]

    def rping(self, port, count=100, size=4096):
        args = ["-v", "-V", "-C", str(count), "-S", str(size), "-p", str(port)]
        cout, _ = self.pair(["rping", "-s", "-a", self.server_ip(), *args],
                            ["rping", "-c", "-a", self.server_ip(), *args], port)
        pings = [line for line in cout.splitlines() if line.startswith("ping data: rdma-ping-")]
        self.assertEqual(len(pings), count, harness.tail(cout))
        self.assertIn(f"rdma-ping-{count - 1}: ", pings[-1])

    def test_rping_moves_verified_data(self):
        self.rping(7174)

    def test_cm_list_on_both_daemons(self):
        # `uroce cm` on each daemon during one rping connection: the server's
        # listener and passive id on the first, the client's id on the
        # second, with the addresses of both namespaces crossed.
        port = 7187
        argv = ["rping", "-a", self.server_ip(), "-p", str(port), "-S", "64"]  # no -C: pings until stopped
        p = CmPair(self.topo.server, self.topo.client, [*argv, "-s"], [*argv, "-c"], port)
        self.addCleanup(p.close)
        self.assertTrue(p.start_server(), "the rping server exited before it listened")
        self.assertEqual(p.listened["comm"], "rping")
        client = subprocess.Popen(self.topo.client.daemon.exec_argv(*argv, "-c"), stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
        self.addCleanup(lambda: (client.kill(), client.wait()))
        server_ip, client_ip = self.topo.net.ip
        deadline = time.monotonic() + 20
        while True:
            active = [e for e in cm_ids(self.topo.client.daemon) if e["state"] == "CONNECT" and e["pid"] == client.pid]
            passive = [e for e in cm_ids(self.topo.server.daemon) if e["state"] == "CONNECT"
                       and e["pid"] == p.server.pid]
            if len(active) == 1 and len(passive) == 1:
                break
            self.assertLess(time.monotonic(), deadline, f"not listed as connected: {active} {passive}")
            time.sleep(0.01)
        a, s = active[0], passive[0]
        self.assertEqual((a["src-addr"], a["dst-addr"], a["dst-port"]), (client_ip, server_ip, port))
        self.assertEqual((s["src-addr"], s["src-port"], s["dst-addr"], s["dst-port"]),
                         (server_ip, port, client_ip, a["src-port"]))
        self.assertEqual((a["ifname"], s["ifname"]), (self.topo.client.device, self.topo.server.device))

    def test_ucmatose_ten_connections(self):
        # The client starts once the server's listener shows, so none of
        # its 10 REQs can come before it (they once straddled the listen:
        # the first refused, REJ 8, later ones accepted, then torn down).
        cout, sout = self.pair(["ucmatose", "-p", "7176", "-c", "10", "-C", "100"],
                               ["ucmatose", "-s", self.server_ip(), "-p", "7176", "-c", "10", "-C", "100"], 7176)
        self.assertIn("return status 0", cout)
        self.assertIn("disconnected", sout)

    def test_udaddy_over_sidr(self):
        cout, sout = self.pair(["udaddy"], ["udaddy", "-s", self.server_ip()], 7174, ps="UDP")
        self.assertIn("return status 0", cout)
        self.assertIn("sending replies", sout)

    def test_perftest_with_rdma_cm(self):
        for tool in ("ib_write_bw", "ib_send_bw"):
            with self.subTest(tool=tool):
                server = [tool, "-R", "-d", self.topo.server.device, "-n", "1000", "-p", "18515"]
                client = [tool, "-R", "-d", self.topo.client.device, "-n", "1000", "-p", "18515", self.server_ip()]
                # perftest's client makes two connections (control, then
                # data); its server destroys the first listener and makes a
                # second one in between. A data REQ that comes in that gap is
                # refused (REJ 8, as cm.c answers a REQ no listener takes),
                # and perftest 4.5-0.17's own retry after REJECTED cannot
                # succeed (it reuses the ids and channel it just destroyed):
                # the client exits. CmPair(relisten=True) then starts the
                # pair afresh, server included, after its listener shows
                # again: a new client against the old server would have its
                # control connection taken as the data connection.
                cout, _ = self.pair(server, client, 18515, relisten=True)
                self.assertIn("#bytes", cout)

    def rsockets_pair(self, tool, port, args):
        """One custom run of rstream or riostream with data verification
        (-T v: the receiver checks every byte); returns the client's output
        row."""
        argv = [tool, "-p", str(port), *args, "-T", "v"]
        cout, sout = self.pair(argv, [tool, "-s", self.server_ip(), *argv[1:]], port)
        for out in (cout, sout):
            self.assertNotIn("verification failed", out)
            self.assertRegex(out, r"(?m)^custom\s", out)

    def test_rstream_verified(self):
        # rsockets' stream path: SENDs and RDMA WRITEs with immediate into
        # the peer's receive buffer, credits returned in messages. Latency
        # (1,000 round trips of 64 bytes) and bandwidth (10 x 1 MB).
        for port, args in ((7182, ["-S", "64", "-I", "1000", "-C", "1"]), (7183, ["-S", "1000000", "-C", "10"])):
            with self.subTest(args=args):
                self.rsockets_pair("rstream", port, args)

    def test_riostream_verified(self):
        # rsockets' riomap/riowrite path: the receiver exposes a buffer with
        # riomap and the sender RDMA WRITEs into it with riowrite; the
        # receiver spins on the buffer's last byte. That spin never yields,
        # so on a machine with fewer cores than spinners each round trip
        # waits for the scheduler (about 18 ms a transfer on a loaded 2-core
        # machine, 2 ms with uroced --realtime-priority): the latency run is
        # kept to 20 round trips.
        for port, args in ((7184, ["-S", "64", "-I", "20", "-C", "1"]), (7185, ["-S", "4096", "-C", "100"]),
                           (7186, ["-S", "1000000", "-C", "10"])):
            with self.subTest(args=args):
                self.rsockets_pair("riostream", port, args)

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
        # UD: a SIDR_REQ nobody listens for is answered with SIDR status 1
        # (service ID not supported, as Linux's cm.c answers), which is what
        # a client early to a server would read as "not listening yet";
        # status 2 (reject) would say the server refused it.
        start = time.monotonic()
        r = subprocess.run(self.topo.client.daemon.exec_argv("udaddy", "-s", self.server_ip()),
                           capture_output=True, text=True, timeout=RUN_SECONDS)
        out = r.stdout + r.stderr
        self.assertNotEqual(r.returncode, 0, out)
        self.assertIn("UNREACHABLE, error: 1\n", out)
        self.assertLess(time.monotonic() - start, REJECT_SECONDS, out)

    def test_af_ib_modes_end_as_on_a_kernel_with_roce(self):
        # librdmacm's AF_IB probe succeeds, as on Linux with a RoCE device, so
        # `-f gid` addresses reach the device; there an AF_IB id binds only
        # the wildcard (a GID: ENODEV) and resolves its address but never a
        # route (no bound netdev: ENODEV), at once. Without AF_IB support
        # librdmacm itself refused them with EINVAL.
        gid = "::ffff:" + self.server_ip()
        cases = [
            (self.topo.server, ["ucmatose", "-f", "gid", "-b", gid, "-p", "7186"],
             "bind address failed: No such device"),
            (self.topo.client, ["ucmatose", "-f", "gid", "-s", gid, "-p", "7186"],
             "resolve route failed: No such device"),
            (self.topo.client, ["udaddy", "-f", "gid", "-s", gid], "resolve route failed: No such device"),
            (self.topo.client, ["rstream", "-f", "gid", "-s", gid, "-S", "64", "-C", "10"], "rconnect: No such device"),
        ]
        for side, argv, sign in cases:
            with self.subTest(argv=" ".join(argv)):
                start = time.monotonic()
                r = subprocess.run(side.daemon.exec_argv(*argv), capture_output=True, text=True, timeout=RUN_SECONDS)
                out = r.stdout + r.stderr
                self.assertNotEqual(r.returncode, 0, out)
                self.assertIn(sign, out)
                self.assertLess(time.monotonic() - start, REJECT_SECONDS, out)

    def test_capture_holds_the_cm_exchange(self):
        # A capture on a port's interface sees the port's own frames too (the
        # daemon's af_packet port goes through the qdisc, docs/daemon.md):
        # each namespace's capture keeps only what its peer sent. The client sends REQ, RTU, DREQ (rping's
        # client disconnects first); the server REP and DREP.
        server_ns, client_ns = self.topo.net.ns
        server_if, client_if = self.topo.net.ifname
        with tempfile.TemporaryDirectory() as tmp:
            server_ip, client_ip = self.topo.net.ip
            captures = {"server": Capture(server_ns, server_if, tmp, server_ip),
                        "client": Capture(client_ns, client_if, tmp, client_ip)}
            try:
                for c in captures.values():
                    c.wait_capturing()
                self.rping(7180, count=5, size=64)
                from_client = self.wait_for_messages(captures["server"].pcap, "DREQ")
                from_server = self.wait_for_messages(captures["client"].pcap, "DREP")
            finally:
                for c in captures.values():
                    c.stop()
        # Attempts made before the server listened would each be refused
        # (REJ 8); the client starts once the listener shows, so none is.
        refused = from_server.count("REJ")
        self.assertEqual(refused, 0, from_server)
        self.assertEqual(from_client, ["REQ"] * refused + ["REQ", "RTU", "DREQ"])
        self.assertEqual(from_server, ["REJ"] * refused + ["REP", "DREP"])

    def wait_for_messages(self, pcap, last, seconds=10):
        """The CM messages `uroce decode` reads in the capture (each well
        formed, every ICRC good), once message `last` is among them (tshark
        writes a little after the fact)."""
        deadline = time.monotonic() + seconds
        messages = []
        while time.monotonic() < deadline:
            if os.path.exists(pcap) and os.path.getsize(pcap) > 24:
                r = subprocess.run([self.uroce, "decode", "--json", pcap], capture_output=True, text=True, timeout=30)
                lines = [json.loads(line) for line in r.stdout.splitlines() if line.strip()]
                frames, totals = lines[:-1], lines[-1] if lines else {}
                messages = [f["cm"]["message"] for f in frames if "cm" in f and f["cm"].get("status") == "ok"]
                if last in messages:
                    self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
                    self.assertEqual(totals.get("icrc_ok"), totals.get("roce"), totals)
                    return messages
            time.sleep(0.1)
        return messages

    def test_connect_to_an_absent_address_is_addr_error_in_bounded_time(self):
        # Nobody has this address on the veth's /24: RESOLVE_ADDR waits for an
        # ARP reply that never comes and ends, as Linux's ib_addr does when
        # the command's timeout passes (rping and ucmatose ask 2000 ms), in
        # ADDR_ERROR with -ETIMEDOUT (addr.c process_one_req), not in the CM's
        # REQ retransmissions (about a minute and a half).
        absent = self.server_ip().rsplit(".", 1)[0] + ".77"
        address_timeout = 2.0  # rping's and ucmatose's rdma_resolve_addr timeout_ms, 2000
        cases = [
            ["rping", "-c", "-a", absent, "-p", "7996", "-C", "1"],
            ["ucmatose", "-s", absent, "-p", "7995"],
        ]
        for argv in cases:
            with self.subTest(argv=" ".join(argv)):
                start = time.monotonic()
                r = subprocess.run(self.topo.client.daemon.exec_argv(*argv), capture_output=True, text=True,
                                   timeout=RUN_SECONDS)
                took = time.monotonic() - start
                out = r.stdout + r.stderr
                print(f"{argv[0]} to absent {absent}: ADDR_ERROR after {took:.2f} s (Linux: the 2.00 s timeout)",
                      file=sys.stderr)
                self.assertNotEqual(r.returncode, 0, out)
                self.assertIn("RDMA_CM_EVENT_ADDR_ERROR", out)
                self.assertIn(str(-errno.ETIMEDOUT), out)
                self.assertNotIn("UNREACHABLE", out)
                self.assertGreaterEqual(took, address_timeout, out)
                self.assertLess(took, address_timeout + REJECT_SECONDS, out)
        self.assertEqual(self.topo.dead_daemons(), [])


class Capture:
    """tshark writing the RoCE v2 frames that reach `iface` in `ns` from
    elsewhere than `own_ip` to a pcap."""

    def __init__(self, ns, iface, directory, own_ip):
        self.pcap = os.path.join(directory, f"{ns}.pcap")
        self.err = tempfile.TemporaryFile(mode="w+")
        self.proc = subprocess.Popen(["ip", "netns", "exec", ns, "tshark", "-q", "-n", "-i", iface, "-F", "pcap",
                                      "-w", self.pcap, "-f", f"udp dst port 4791 and not src host {own_ip}"], stdout=subprocess.DEVNULL,
                                     stderr=self.err, stdin=subprocess.DEVNULL)

    def wait_capturing(self):
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and self.proc.poll() is None:
            self.err.seek(0)
            if "Capturing on" in self.err.read():
                # The file exists once libpcap opened it: the filter is in.
                if os.path.exists(self.pcap):
                    return
            time.sleep(0.05)
        self.err.seek(0)
        raise AssertionError(f"tshark did not start capturing: {self.err.read()}")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.err.close()


def main():
    harness.set_binaries(sys.argv[1], sys.argv[2])
    RdmaCmOverTheWire.uroce = os.path.abspath(sys.argv[2])
    tools = ["rping", "ucmatose", "udaddy", "ib_write_bw", "ib_send_bw", "tshark", "rstream", "riostream"]

    def suite(topo):
        RdmaCmOverTheWire.topo = topo
        return unittest.defaultTestLoader.loadTestsFromTestCase(RdmaCmOverTheWire)

    return harness.run_tests("veth", tools, suite)


if __name__ == "__main__":
    sys.exit(main())
