#!/usr/bin/env python3
"""qperf (Debian's qperf 0.4.11) over uroce between two uroced in two network
namespaces, its RC tests connected through rdma_cm (-cm1: the emulated
rdma_cm device and the IB CM on the wire): rc_bw, rc_lat, rc_rdma_write_bw
and rc_rdma_read_bw each report a positive figure and `use_cm = 1`. The
client's last test, `quit`, ends the server.

qperf's UD tests (ud_lat, ud_bw) are not run: qperf builds their address
handle from a LID without a GRH, which a RoCE device refuses (EINVAL, as
Linux's mlx5_ib_create_ah does for a RoCE AH without GRH), with or without
-cm1.

usage: test_qperf.py UROCED UROCE
Exit 77 (skipped) when not root or qperf is missing.
"""

import os
import re
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import uroce_harness as harness  # noqa: E402

LISTEN_PORT = 19765  # qperf's default
TESTS = ("rc_bw", "rc_lat", "rc_rdma_write_bw", "rc_rdma_read_bw")


class Qperf(unittest.TestCase):
    topo = None

    def test_rc_tests_over_rdma_cm(self):
        client = ["qperf", "-cm1", "-t", "1", "-v", self.topo.net.ip[0], *TESTS, "quit"]
        r = harness.run_pair(self.topo, ["qperf"], client, LISTEN_PORT, timeout=90)
        self.assertTrue(r.ok(), f"{r.summary()}\n{r.describe()}")
        out = r.client.output
        for test in TESTS:
            with self.subTest(test=test):
                block = re.search(rf"(?ms)^{test}:\n(.*?)(?=^\S|\Z)", out)
                self.assertIsNotNone(block, out)
                self.assertRegex(block.group(1), r"use_cm\s+=\s+1\b", out)
                figure = re.search(r"(?m)^\s+(bw|latency)\s+=\s+([0-9.]+)", block.group(1))
                self.assertIsNotNone(figure, out)
                self.assertGreater(float(figure.group(2)), 0, out)


def main():
    harness.set_binaries(sys.argv[1], sys.argv[2])

    def suite(topo):
        Qperf.topo = topo
        return unittest.defaultTestLoader.loadTestsFromTestCase(Qperf)

    return harness.run_tests("veth", ["qperf"], suite)


if __name__ == "__main__":
    sys.exit(main())
