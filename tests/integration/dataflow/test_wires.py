#!/usr/bin/env python3
"""Jumbo frames and the shared-memory wire (docs/wires.md): two uroced in two
namespaces, on a veth with a 9000-byte MTU (net_af_packet) or on net_memif;
or one uroced on the loopback port with --mtu 9000.

usage: test_wires.py --topology {loopback-jumbo,veth-jumbo,memif,memif-client-first} UROCED UROCE BYTE_CHECK

memif-client-first starts the memif client's daemon before the server's:
the client dials again until the server is there (docs/wires.md), and the
same checks then pass.

Passes when:
- both daemons chose the active IB MTU 4096 by themselves (no --mtu given);
- byte_check moves every byte of WRITE, READ and SEND across 4096-byte
  packet boundaries, and every access error completes as it should;
- 64 KiB RDMA WRITEs at path MTU 4096 (ib_write_bw) travel in frames whose
  average size, from the sending daemon's port counters, is larger than any
  frame a 1500-byte MTU carries: the payload went out in ~4 KiB packets.
"""

import argparse
import os
import re
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import uroce_harness as harness  # noqa: E402

BYTE_CHECK = None
RUN_TIMEOUT = 180
JUMBO_IB_MTU = 4096
# The largest frame a 1500-byte Ethernet MTU carries (header and one VLAN tag).
STANDARD_MAX_FRAME = 1500 + 18
# A 4096-byte RoCEv2 payload: Ethernet 14 + IPv4 20 + UDP 8 + BTH 12 + RETH 16 (first packet only) + ICRC 4.
JUMBO_DATA_FRAME = JUMBO_IB_MTU + 14 + 20 + 8 + 12 + 4
WRITE_SIZE = 65536
WRITE_ITERS = 400
# What byte_check runs: 11 sizes x (3 WRITE + 3 READ + 1 SEND), one READ of
# the MR without REMOTE_WRITE, 11 access errors (test_byte_check.py).
BYTE_CHECK_CASES = 11 * 7 + 1 + 11


class WireTests(unittest.TestCase):
    topo = None  # set by make_suite

    def test_active_mtu_4096_by_default(self):
        for endpoint in (self.topo.server, self.topo.client):
            self.assertEqual(endpoint.mtu, JUMBO_IB_MTU, endpoint.daemon.status_text)

    def test_every_byte_at_path_mtu_4096(self):
        topo = self.topo
        port = harness.free_tcp_port()
        server = [BYTE_CHECK, "-d", topo.server.device, "-g", str(topo.server.gid_index), "-p", str(port)]
        client = [BYTE_CHECK, "-d", topo.client.device, "-g", str(topo.client.gid_index), "-p", str(port),
                  topo.server.tcp_host]
        result = harness.run_pair(topo, server, client, port, timeout=RUN_TIMEOUT)
        detail = result.describe()
        if not result.ok():
            self.fail(f"{result.summary()}\n{detail}")
        out = result.client.output
        self.assertIn(f"path MTU {JUMBO_IB_MTU} B", out, detail)
        self.assertEqual(re.findall(r"(?m)^FAIL .*$", out + result.server.output), [], detail)
        total = re.search(r"(?m)^(\d+) case\(s\), (\d+) failure\(s\)$", out)
        self.assertTrue(total, f"no closing line\n{detail}")
        self.assertEqual((int(total.group(1)), int(total.group(2))), (BYTE_CHECK_CASES, 0), detail)

    def test_write_payload_travels_in_4k_frames(self):
        topo = self.topo
        sender = topo.client.daemon
        before = sender.stats()["port"]
        port = harness.free_tcp_port()

        def argv(endpoint):
            return ["ib_write_bw", "-d", endpoint.device, "-x", str(endpoint.gid_index), "-m", str(JUMBO_IB_MTU),
                    "-p", str(port), "-F", "-s", str(WRITE_SIZE), "-n", str(WRITE_ITERS)]

        result = harness.run_pair(topo, argv(topo.server), argv(topo.client) + [topo.server.tcp_host], port,
                                  timeout=RUN_TIMEOUT)
        detail = result.describe()
        if not result.ok():
            self.fail(f"{result.summary()}\n{detail}")
        row = harness.perftest_row(result.client.output)
        self.assertIsNotNone(row, f"no result row\n{detail}")
        after = sender.stats()["port"]
        frames = after["tx_frames"] - before["tx_frames"]
        sent = after["tx_bytes"] - before["tx_bytes"]
        payload = WRITE_SIZE * WRITE_ITERS
        sys.stderr.write(f"    ib_write_bw -s {WRITE_SIZE} -n {WRITE_ITERS}: {row}; sender: {frames} frames, "
                         f"{sent} bytes, {sent / max(frames, 1):.0f} B/frame\n")
        self.assertGreaterEqual(sent, payload, "the sender's port moved less than the payload")
        # At least the data packets: payload / 4096 of them, each ~4 KiB.
        self.assertGreaterEqual(frames, payload // JUMBO_IB_MTU)
        self.assertGreater(sent / frames, STANDARD_MAX_FRAME,
                           f"average frame {sent / frames:.0f} B: the payload did not go out in jumbo frames")
        self.assertLessEqual(sent / frames, JUMBO_DATA_FRAME + 16)
        self.assertEqual(topo.dead_daemons(), [], topo.daemon_logs())


def make_suite(topo):
    WireTests.topo = topo
    return unittest.TestLoader().loadTestsFromTestCase(WireTests)


def main():
    global BYTE_CHECK
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--topology", required=True,
                    choices=["loopback-jumbo", "veth-jumbo", "memif", "memif-client-first"])
    ap.add_argument("uroced")
    ap.add_argument("uroce")
    ap.add_argument("byte_check")
    args = ap.parse_args()
    BYTE_CHECK = os.path.abspath(args.byte_check)
    harness.set_binaries(args.uroced, args.uroce)
    return harness.run_tests(args.topology, ["ib_write_bw"], make_suite)


if __name__ == "__main__":
    sys.exit(main())
