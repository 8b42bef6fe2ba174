#!/usr/bin/env python3
"""byte_check (byte_check.c) through uroce: every byte of RDMA WRITE, READ
and SEND across path-MTU boundaries, and remote access errors that complete
with IBV_WC_REM_ACCESS_ERR without changing a byte.

usage: test_byte_check.py --topology {loopback,veth} [--sanitize] UROCED UROCE BYTE_CHECK

The server runs on the topology's server side, the client on its client side
(uroce_harness.Topology). Passes when both exit 0, the client printed no FAIL
line and its closing "N case(s), 0 failure(s)" with every case it is known
to run, and the server said it was done.
"""

import argparse
import os
import re
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import uroce_harness as harness  # noqa: E402

BYTE_CHECK = None
SANITIZE = False
RUN_TIMEOUT = 180
# What byte_check runs: 11 sizes x (3 WRITE + 3 READ + 1 SEND), one READ of
# the MR without REMOTE_WRITE, 11 access errors.
EXPECTED_CASES = 11 * 7 + 1 + 11


class ByteCheckTests(unittest.TestCase):
    topo = None  # set by make_suite

    def test_every_byte_and_every_access_error(self):
        topo = self.topo
        port = harness.free_tcp_port()
        common = ["-p", str(port)]
        server = [BYTE_CHECK, "-d", topo.server.device, "-g", str(topo.server.gid_index), *common]
        client = [BYTE_CHECK, "-d", topo.client.device, "-g", str(topo.client.gid_index), *common,
                  topo.server.tcp_host]
        result = harness.run_pair(topo, server, client, port, timeout=RUN_TIMEOUT)
        out = result.client.output
        fails = re.findall(r"(?m)^FAIL .*$", out) + re.findall(r"(?m)^FAIL .*$", result.server.output)
        oks = re.findall(r"(?m)^ok   .*$", out)
        sys.stderr.write(f"    byte_check: {len(oks)} ok, {len(fails)} FAIL; server exit {result.server.returncode},"
                         f" client exit {result.client.returncode}\n")
        for line in fails[:20]:
            sys.stderr.write(f"      {line}\n")
        detail = result.describe()
        if fails:
            self.fail(f"{len(fails)} FAIL line(s), the first: {fails[0]}\n{result.summary()}\n{detail}")
        if not result.ok():
            self.fail(f"{result.summary()}\n{detail}")
        total = re.search(r"(?m)^(\d+) case\(s\), (\d+) failure\(s\)$", out)
        self.assertTrue(total, f"no closing line\n{detail}")
        self.assertEqual((int(total.group(1)), int(total.group(2))), (EXPECTED_CASES, 0), detail)
        self.assertEqual(len(oks), EXPECTED_CASES, detail)
        self.assertIn("server: done", result.server.output, detail)
        self.assertEqual(topo.dead_daemons(), [], topo.daemon_logs())
        if SANITIZE:
            # A correct program: the RDMA sanitizer (docs/sanitizer.md) finds nothing.
            reports = re.findall(r"(?m)^uroce-sanitizer.*$", out + result.server.output)
            self.assertEqual(reports, [], detail)


def make_suite(topo):
    ByteCheckTests.topo = topo
    return unittest.TestLoader().loadTestsFromTestCase(ByteCheckTests)


def main():
    global BYTE_CHECK, SANITIZE
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--topology", choices=["loopback", "veth"], required=True)
    ap.add_argument("--sanitize", action="store_true",
                    help="run both sides under the RDMA sanitizer (UROCE_SANITIZE=1) and expect no report")
    ap.add_argument("uroced")
    ap.add_argument("uroce")
    ap.add_argument("byte_check")
    args = ap.parse_args()
    BYTE_CHECK = os.path.abspath(args.byte_check)
    SANITIZE = args.sanitize
    if SANITIZE:
        os.environ["UROCE_SANITIZE"] = "1"  # uroce exec passes it on to both programs
    harness.set_binaries(args.uroced, args.uroce)
    return harness.run_tests(args.topology, [], make_suite)


if __name__ == "__main__":
    sys.exit(main())
