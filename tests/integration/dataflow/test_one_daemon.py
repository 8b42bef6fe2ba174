#!/usr/bin/env python3
"""Several devices in one daemon (docs/daemon.md): one uroced serves two
devices, uroce_a on its end of a veth (net_af_packet, in the first
namespace) and uroce_b on the other end, a --device whose port the daemon
opens inside the second namespace (veth-one-daemon); or the two ends of a
memif pair inside the process (memif-one-daemon). Each program uses its
own device through `uroce exec --state-dir`.

usage: test_one_daemon.py --topology {veth-one-daemon,memif-one-daemon} UROCED UROCE

Passes when:
- both devices answer `uroce status` and one uroced process serves them;
- each side lists only its own device (one libibverbs device per state directory);
- ibv_rc_pingpong -c (every byte checked) runs between the two devices;
- ib_write_bw -s 65536 runs from uroce_b to uroce_a, and each device's
  `uroce stats` counts its own side of it: uroce_b's port sent the payload,
  uroce_a's port received it, and neither counted the other's direction.
"""

import argparse
import os
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import uroce_harness as harness  # noqa: E402

RUN_TIMEOUT = 120
PINGPONG_SIZE = 4096
PINGPONG_ITERS = 500
WRITE_SIZE = 65536
WRITE_ITERS = 500


class OneDaemonTests(unittest.TestCase):
    topo = None  # set by make_suite

    def test_one_process_serves_both_devices(self):
        topo = self.topo
        self.assertEqual(len(topo.daemons), 1)
        self.assertIs(topo.server.daemon.proc, topo.client.daemon.proc)
        log = topo.daemons[0].log_text()
        for endpoint in (topo.server, topo.client):
            self.assertIn(f"{endpoint.device} ready:", log)

    def test_each_side_sees_its_own_device(self):
        for endpoint, other in ((self.topo.server, self.topo.client), (self.topo.client, self.topo.server)):
            r = subprocess.run(endpoint.daemon.exec_argv("ibv_devices"), capture_output=True, text=True, timeout=60)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn(endpoint.device, r.stdout)
            self.assertNotIn(other.device, r.stdout)

    def test_rc_pingpong_bytes_checked(self):
        topo = self.topo
        port = harness.free_tcp_port()

        def argv(endpoint):
            return ["ibv_rc_pingpong", "-d", endpoint.device, "-g", str(endpoint.gid_index), "-p", str(port),
                    "-s", str(PINGPONG_SIZE), "-n", str(PINGPONG_ITERS), "-m", str(endpoint.mtu), "-c"]

        result = harness.run_pair(topo, argv(topo.server), argv(topo.client) + [topo.server.tcp_host], port,
                                  timeout=RUN_TIMEOUT)
        if not result.ok():
            self.fail(f"{result.summary()}\n{result.describe()}")
        for side in (result.server, result.client):
            self.assertIn(f"{PINGPONG_ITERS} iters in", side.output, result.describe())

    def test_write_bw_counted_by_each_device(self):
        topo = self.topo
        receiver, sender = topo.server.daemon, topo.client.daemon
        before = {d.name: d.stats()["port"] for d in (receiver, sender)}
        port = harness.free_tcp_port()

        def argv(endpoint):
            return ["ib_write_bw", "-d", endpoint.device, "-x", str(endpoint.gid_index), "-p", str(port), "-F",
                    "-s", str(WRITE_SIZE), "-n", str(WRITE_ITERS)]

        result = harness.run_pair(topo, argv(topo.server), argv(topo.client) + [topo.server.tcp_host], port,
                                  timeout=RUN_TIMEOUT)
        detail = result.describe()
        if not result.ok():
            self.fail(f"{result.summary()}\n{detail}")
        row = harness.perftest_row(result.client.output)
        self.assertIsNotNone(row, f"no result row\n{detail}")
        after = {d.name: d.stats()["port"] for d in (receiver, sender)}

        def moved(daemon, counter):
            return after[daemon.name][counter] - before[daemon.name][counter]

        payload = WRITE_SIZE * WRITE_ITERS
        sys.stderr.write(f"    ib_write_bw -s {WRITE_SIZE} -n {WRITE_ITERS}: {row}; {sender.name} sent "
                         f"{moved(sender, 'tx_bytes')} B, {receiver.name} received {moved(receiver, 'rx_bytes')} B\n")
        self.assertGreaterEqual(moved(sender, "tx_bytes"), payload)
        self.assertGreaterEqual(moved(receiver, "rx_bytes"), payload)
        # The other direction carried only acknowledgements (and perftest's
        # own small exchange): each device counted its own side.
        self.assertLess(moved(receiver, "tx_bytes"), payload // 4)
        self.assertLess(moved(sender, "rx_bytes"), payload // 4)
        self.assertEqual(topo.dead_daemons(), [], topo.daemon_logs())


def make_suite(topo):
    OneDaemonTests.topo = topo
    return unittest.TestLoader().loadTestsFromTestCase(OneDaemonTests)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--topology", choices=["veth-one-daemon", "memif-one-daemon"], required=True)
    ap.add_argument("uroced")
    ap.add_argument("uroce")
    args = ap.parse_args()
    harness.set_binaries(args.uroced, args.uroce)
    return harness.run_tests(args.topology, ["ibv_rc_pingpong", "ibv_devices", "ib_write_bw"], make_suite)


if __name__ == "__main__":
    sys.exit(main())
