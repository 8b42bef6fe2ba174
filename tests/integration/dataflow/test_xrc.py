#!/usr/bin/env python3
"""XRC through uroce (docs/provider.md "XRC"): stock ibv_xsrq_pingpong and
perftest -c XRC, and xrc_check, which checks the bytes.

usage: test_xrc.py --topology {loopback,veth} UROCED UROCE XRC_CHECK

- ibv_xsrq_pingpong, one client and three clients (separate processes on the
  client's daemon; their XRC domain is one, shared through /tmp/xrc_domain,
  so the server's messages reach each client through any client's target
  QP): every program exits 0 and prints "success".
- perftest -c XRC: ib_send_bw, ib_write_bw, ib_read_bw and ib_send_lat, as
  test_perftest.py checks a run (result row with the size and iteration
  count, positive figures). perftest does not check its data.
- xrc_check on each daemon (the XRC send QP and target QP on one device):
  SENDs land byte for byte in the SRQ they name and complete into its CQ,
  RDMA WRITE and READ move their bytes, and a SEND naming no SRQ or an SRQ
  of another domain is NAKed (REM_INV_REQ_ERR, REM_ACCESS_ERR) and delivers
  nothing; target QPs shared by several handles (xrc_check.c says how).

Exit 77 (skipped), with the reason, without root or the tools.
"""

import argparse
import os
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import uroce_harness as harness  # noqa: E402
from test_perftest import perftest_argv  # noqa: E402

TOOLS = ["ibv_xsrq_pingpong", "ib_send_bw", "ib_write_bw", "ib_read_bw", "ib_send_lat"]
RUN_TIMEOUT = 90
PINGPONG_ITERS = 500
XRC_CHECK = None  # set by main


def xsrq_argv(endpoint, tcp_port, size, clients=None):
    argv = ["ibv_xsrq_pingpong", "-d", endpoint.device, "-g", str(endpoint.gid_index), "-p", str(tcp_port),
            "-s", str(size), "-m", str(endpoint.mtu), "-n", str(PINGPONG_ITERS)]
    if clients is not None:
        argv += ["-c", str(clients)]
    return argv


class XrcTests(unittest.TestCase):
    topo = None  # set by make_suite

    def run_xsrq(self, clients, size):
        """The server (-c clients) and `clients` client processes; all must
        print "success"."""
        topo = self.topo
        port = harness.free_tcp_port()
        server = harness.start_program("server", topo.server.daemon.exec_argv(*xsrq_argv(topo.server, port, size,
                                                                                          clients)))
        programs = [server]
        why = "the test stopped"
        try:
            self.assertTrue(harness.wait_listening(port, server.proc), "the server did not listen")
            for i in range(clients):
                argv = xsrq_argv(topo.client, port, size) + [topo.server.tcp_host]
                programs.append(harness.start_program(f"client{i}", topo.client.daemon.exec_argv(*argv)))
            deadline = time.monotonic() + RUN_TIMEOUT
            while time.monotonic() < deadline and any(p.proc.poll() is None for p in programs):
                if any(p.proc.poll() not in (None, 0) for p in programs):
                    deadline = min(deadline, time.monotonic() + 3)
                time.sleep(0.01)
            why = f"still running after the {RUN_TIMEOUT} s limit"
        finally:
            sides = [p.finish(why) for p in programs]
        detail = "\n".join(s.describe() for s in sides)
        sys.stderr.write(f"    ibv_xsrq_pingpong -c {clients} -s {size}: exits "
                         f"{[s.returncode for s in sides]}\n")
        for s in sides:
            self.assertEqual(s.returncode, 0, f"{s.role} failed\n{detail}")
            self.assertRegex(s.output, r"(?m)^success$", f"{s.role}\n{detail}")
        self.assertEqual(topo.dead_daemons(), [], topo.daemon_logs())

    def test_xsrq_pingpong_one_client(self):
        self.run_xsrq(1, 4096)

    def test_xsrq_pingpong_three_clients(self):
        self.run_xsrq(3, 1024)

    def run_perftest(self, tool, size, iters, extra=()):
        topo = self.topo
        port = harness.free_tcp_port()
        extra = ["-c", "XRC", *extra]
        server = perftest_argv(topo.server, tool, size, iters, port, extra)
        client = perftest_argv(topo.client, tool, size, iters, port, extra) + [topo.server.tcp_host]
        result = harness.run_pair(topo, server, client, port, timeout=RUN_TIMEOUT)
        row = harness.perftest_row(result.client.output)
        sys.stderr.write(f"    {tool} -c XRC -s {size} -n {iters}: server exit {result.server.returncode}, client "
                         f"exit {result.client.returncode}, result {row}\n")
        detail = result.describe()
        if not result.ok():
            self.fail(f"{result.summary()}\n{detail}")
        self.assertIsNotNone(row, f"no result row in the client's output\n{detail}")
        self.assertEqual(int(row["#bytes"]), size, detail)
        self.assertEqual(int(row["#iterations"]), iters, detail)
        self.assertEqual(topo.dead_daemons(), [], topo.daemon_logs())
        return row, detail

    def check_bw(self, tool):
        row, detail = self.run_perftest(tool, 65536, 500)
        bw_key = next((k for k in row if k.startswith("BW average")), None)
        self.assertIsNotNone(bw_key, f"no BW average column: {row}\n{detail}")
        self.assertGreater(row[bw_key], 0.0, detail)

    def test_send_bw(self):
        self.check_bw("ib_send_bw")

    def test_write_bw(self):
        self.check_bw("ib_write_bw")

    def test_read_bw(self):
        self.check_bw("ib_read_bw")

    def test_send_lat(self):
        row, detail = self.run_perftest("ib_send_lat", 4096, 1000)
        t_min, t_avg, t_max = row.get("t_min[usec]"), row.get("t_avg[usec]"), row.get("t_max[usec]")
        self.assertTrue(None not in (t_min, t_avg, t_max), f"latency columns missing: {row}\n{detail}")
        self.assertTrue(0.0 < t_min <= t_avg <= t_max, f"latencies {row}\n{detail}")

    def test_xrc_check_bytes_and_naks(self):
        for d in self.topo.daemons:
            with self.subTest(daemon=d.name):
                r = subprocess.run(d.exec_argv(XRC_CHECK, d.name, str(d.gid_index())), capture_output=True,
                                   text=True, timeout=RUN_TIMEOUT)
                self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
                self.assertIn("xrc_check: ok", r.stdout)
        self.assertEqual(self.topo.dead_daemons(), [], self.topo.daemon_logs())


def make_suite(topo):
    XrcTests.topo = topo
    loader = unittest.TestLoader()
    suite = unittest.TestSuite()
    only = os.environ.get("UROCE_DATAFLOW_ONLY")
    for name in loader.getTestCaseNames(XrcTests):
        if not only or only in name:
            suite.addTest(XrcTests(name))
    return suite


def main():
    global XRC_CHECK
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--topology", choices=["loopback", "veth"], required=True)
    ap.add_argument("uroced")
    ap.add_argument("uroce")
    ap.add_argument("xrc_check")
    args = ap.parse_args()
    XRC_CHECK = os.path.abspath(args.xrc_check)
    harness.set_binaries(args.uroced, args.uroce)
    return harness.run_tests(args.topology, TOOLS, make_suite)


if __name__ == "__main__":
    sys.exit(main())
