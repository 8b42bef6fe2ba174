#!/usr/bin/env python3
"""The loopback port's ICRC shortcut (docs/architecture.md, "ICRC on the
loopback port") against what watches frames mid-transfer.

usage: test_loopback_icrc.py UROCED UROCE

On the loopback topology, while ib_write_bw moves 64 KiB WRITEs (frames the
engine builds without an ICRC, since nothing reads it):
- a capture started mid-run gets every frame with a good ICRC (`uroce
  decode` exits 0): the frames already queued were sealed when it started,
  and later ones were built with one;
- a rule that duplicates every received frame, added mid-run, makes copies
  the engine checks: none of them is dropped as bad_icrc;
- a rule that corrupts received frames still has them dropped as bad_icrc
  (the shortcut never vouches for a copy);
- the transfer finishes with all its iterations, and the daemon lives.
Exit 77 (skipped), with the reason, without root or the tools.
"""

import os
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import uroce_harness as harness  # noqa: E402

TOOLS = ["ib_write_bw"]
SIZE = 65536
SECONDS = 4  # long enough for the three watchers below to start and stop mid-run
CAPTURE_FRAMES = 2000
DUPLICATED_FRAMES = 2000


def uroce(daemon, *args, timeout=30):
    r = subprocess.run([daemon.uroce, *args, "--state-dir", daemon.state, "--device", daemon.name],
                       capture_output=True, text=True, timeout=timeout)
    if r.returncode != 0:
        raise AssertionError(f"uroce {' '.join(args)}: exit {r.returncode}\n{r.stdout}\n{r.stderr}")
    return r.stdout


def counters(daemon):
    return daemon.flat_counters()


class LoopbackIcrcTests(unittest.TestCase):
    topo = None  # set by make_suite

    def setUp(self):
        self.daemon = self.topo.daemons[0]
        uroce(self.daemon, "fault", "clear")

    def start_traffic(self):
        e = self.topo.server
        port = harness.free_tcp_port()
        argv = ["ib_write_bw", "-d", e.device, "-x", str(e.gid_index), "-m", str(e.mtu), "-F", "-s", str(SIZE),
                "-D", str(SECONDS), "-p", str(port)]
        server = harness.start_program("server", self.daemon.exec_argv(*argv))
        self.assertTrue(harness.wait_listening(port, server.proc), "ib_write_bw's server did not listen")
        client = harness.start_program("client", self.daemon.exec_argv(*argv, self.topo.client.tcp_host))
        before = counters(self.daemon)["tx_packets"]
        moving = harness.wait_for(lambda: counters(self.daemon)["tx_packets"] > before + 1000, 20)
        self.assertTrue(moving, "no WRITE traffic within 20 s")
        return server, client

    def finish_traffic(self, server, client):
        for program in (client, server):
            try:
                program.proc.wait(timeout=SECONDS + 60)
            except subprocess.TimeoutExpired:
                pass  # killed and reported by finish()
        client_side = client.finish("still running after the run's time")
        server_side = server.finish("still running after the run's time")
        for side in (server_side, client_side):
            self.assertEqual(side.returncode, 0, side.describe())
        row = harness.perftest_row(client_side.output)
        self.assertIsNotNone(row, client_side.describe())
        self.assertEqual(int(row["#bytes"]), SIZE)
        self.assertEqual(self.topo.dead_daemons(), [], self.topo.daemon_logs())

    def wait_until(self, counter, at_least):
        ok = harness.wait_for(lambda: counters(self.daemon)[counter] >= at_least, 20)
        self.assertTrue(ok, f"{counter} did not reach {at_least} within 20 s: {counters(self.daemon)[counter]}")

    def test_capture_started_mid_run_has_every_icrc(self):
        server, client = self.start_traffic()
        with tempfile.TemporaryDirectory(prefix="uroce-icrc-") as tmp:
            pcap = os.path.join(tmp, "mid-run.pcapng")
            uroce(self.daemon, "capture", "--count", str(CAPTURE_FRAMES), "-w", pcap)
            r = subprocess.run([self.daemon.uroce, "decode", pcap], capture_output=True, text=True, timeout=60)
        self.finish_traffic(server, client)
        totals = r.stdout.strip().splitlines()[-1] if r.stdout.strip() else ""
        sys.stderr.write(f"    capture mid-run: {totals}\n")
        self.assertRegex(totals, rf"^{CAPTURE_FRAMES} frames, {CAPTURE_FRAMES} roce, {CAPTURE_FRAMES} icrc ok, "
                                 r"0 icrc bad$")
        self.assertEqual(r.returncode, 0, r.stdout[-2000:])

    def test_rules_added_mid_run_see_sealed_frames(self):
        server, client = self.start_traffic()
        before = counters(self.daemon)
        rule = uroce(self.daemon, "fault", "add", "duplicate:rate=100%,dir=rx").split()[0]
        self.wait_until("faults.duplicated", before["faults.duplicated"] + DUPLICATED_FRAMES)
        uroce(self.daemon, "fault", "clear", rule)
        after_duplicates = counters(self.daemon)
        # Copies are checked: one made of a frame still without its ICRC
        # would be dropped here.
        self.assertEqual(after_duplicates["dropped.bad_icrc"], before["dropped.bad_icrc"])
        uroce(self.daemon, "fault", "add", "corrupt:nth=1,dir=rx")
        self.wait_until("faults.corrupted", after_duplicates["faults.corrupted"] + 1)
        uroce(self.daemon, "fault", "clear")
        self.wait_until("dropped.bad_icrc", after_duplicates["dropped.bad_icrc"] + 1)
        self.finish_traffic(server, client)
        end = counters(self.daemon)
        sys.stderr.write(f"    duplicated {end['faults.duplicated'] - before['faults.duplicated']}, corrupted "
                         f"{end['faults.corrupted'] - before['faults.corrupted']}, bad_icrc "
                         f"{end['dropped.bad_icrc'] - before['dropped.bad_icrc']}\n")


def make_suite(topo):
    LoopbackIcrcTests.topo = topo
    return unittest.TestLoader().loadTestsFromTestCase(LoopbackIcrcTests)


def main():
    harness.set_binaries(sys.argv[1], sys.argv[2])
    return harness.run_tests("loopback", TOOLS, make_suite)


if __name__ == "__main__":
    sys.exit(main())
