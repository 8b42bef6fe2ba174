#!/usr/bin/env python3
"""perftest, unmodified, through uroce: every bandwidth and latency test of
the RDMA verbs (WRITE, READ, SEND, atomics).

usage: test_perftest.py --topology {loopback,veth} UROCED UROCE

Each run uses the RoCE v2 GID of the daemon's IPv4 address (-x), the port's
active MTU (-m) and a fixed iteration count (-n), so its length is bounded by
work rather than by a clock; the bandwidth tests run 4 QPs (-q 4). A run
passes when both sides exit 0 and the client prints its result row for the
requested size and iteration count with a positive bandwidth and message
rate (bandwidth tests) or ordered, positive latencies (latency tests).
Across the veth, ib_write_bw and ib_read_bw also run with 256 QPs, against 8
QPs moving the same bytes (MANY_QPS_MIN_RATIO, docs/congestion.md).
perftest does not check the data it moves: byte_check does.
"""

import argparse
import math
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import uroce_harness as harness  # noqa: E402

RUN_TIMEOUT = 90  # per run; the largest moves 200 MiB
BW_QPS = 4

# Iterations per size (per QP for the bandwidth tests): 1 MiB messages get
# fewer so that a run stays a few seconds even at 1 Gbit/s.
BW_SIZES = {64: 1000, 4096: 1000, 65536: 500, 1 << 20: 50}
LAT_SIZES = {2: 1000, 4096: 1000, 1 << 20: 50}
ATOMIC_ITERS = 1000

# Many QPs (docs/congestion.md): 256 QPs must share the wire about as well as
# 8 do. Both runs move the same bytes (64 KiB messages, 2560 in all); the
# 256-QP run must reach MANY_QPS_MIN_RATIO of the 8-QP run's bandwidth. On an
# idle machine it reaches 0.7 to 0.9; one pair's ratio swings with the load
# of the machine (0.33 to 0.89 seen at a load average of 12 to 17 on 2
# cores), so the floor stays low: it catches the collapse it guards against
# (0.06 for WRITE; READ ended in RETRY_EXC_ERR). What does not swing with the
# load is how much of the 256-QP run is sent again: at most
# MANY_QPS_MAX_RESENT of the packets the two daemons sent (0.1% or less now;
# 4 to 5% when the receive ring overflowed and ACK timeouts found the losses).
MANY_QPS = 256
FEW_QPS = 8
MANY_QPS_SIZE = 65536
MANY_QPS_MESSAGES = 2560
MANY_QPS_MIN_RATIO = 0.25
MANY_QPS_MAX_RESENT = 0.02
ATOMICS = ["FETCH_AND_ADD", "CMP_AND_SWAP"]

BW_TOOLS = ["ib_write_bw", "ib_read_bw", "ib_send_bw"]
LAT_TOOLS = ["ib_write_lat", "ib_read_lat", "ib_send_lat"]
TOOLS = BW_TOOLS + LAT_TOOLS + ["ib_atomic_bw", "ib_atomic_lat"]


def perftest_argv(endpoint, tool, size, iters, tcp_port, extra=()):
    return [tool, "-d", endpoint.device, "-x", str(endpoint.gid_index), "-m", str(endpoint.mtu), "-p",
            str(tcp_port), "-F", "-s", str(size), "-n", str(iters), *extra]


class PerftestTests(unittest.TestCase):
    topo = None  # set by make_suite

    def run_case(self, tool, size, iters, extra=(), qps=1):
        topo = self.topo
        port = harness.free_tcp_port()
        server = perftest_argv(topo.server, tool, size, iters, port, extra)
        client = perftest_argv(topo.client, tool, size, iters, port, extra) + [topo.server.tcp_host]
        result = harness.run_pair(topo, server, client, port, timeout=RUN_TIMEOUT)
        row = harness.perftest_row(result.client.output)
        sys.stderr.write(f"    {tool} -s {size} -n {iters} {' '.join(extra)}: server exit {result.server.returncode}, "
                         f"client exit {result.client.returncode}, result {row}\n")
        detail = result.describe()
        if not result.ok():
            self.fail(f"{result.summary()}\n{detail}")
        self.assertIsNotNone(row, f"no result row in the client's output\n{detail}")
        self.assertEqual(int(row["#bytes"]), size, detail)
        # perftest counts iterations over all QPs (-q): -n per QP.
        self.assertEqual(int(row["#iterations"]), iters * qps, detail)
        self.assertEqual(topo.dead_daemons(), [], topo.daemon_logs())
        return row, detail

    def check_bw(self, tool, size, iters, extra=()):
        row, detail = self.run_case(tool, size, iters, ["-q", str(BW_QPS), *extra], qps=BW_QPS)
        bw_key = next((k for k in row if k.startswith("BW average")), None)
        self.assertIsNotNone(bw_key, f"no BW average column: {row}\n{detail}")
        self.assertGreater(row[bw_key], 0.0, detail)
        self.assertGreater(row["MsgRate[Mpps]"], 0.0, detail)

    def bw_of(self, tool, size, iters, qps):
        row, detail = self.run_case(tool, size, iters, ["-q", str(qps)], qps=qps)
        bw_key = next((k for k in row if k.startswith("BW average")), None)
        self.assertIsNotNone(bw_key, f"no BW average column: {row}\n{detail}")
        return row[bw_key]

    def check_many_qps(self, tool):
        if self.topo.kind != "veth":
            # One daemon at both ends of every QP is another problem than many
            # QPs sharing a wire (docs/congestion.md, "Known limits").
            self.skipTest("many QPs are measured across the veth")
        few = self.bw_of(tool, MANY_QPS_SIZE, MANY_QPS_MESSAGES // FEW_QPS, FEW_QPS)
        before = self.engine_totals()
        many = self.bw_of(tool, MANY_QPS_SIZE, MANY_QPS_MESSAGES // MANY_QPS, MANY_QPS)
        after = self.engine_totals()
        sent = after["tx_packets"] - before["tx_packets"]
        resent = after["retransmitted_packets"] - before["retransmitted_packets"]
        timeouts = after["timeouts"] - before["timeouts"]
        sys.stderr.write(f"    {tool}: -q {FEW_QPS} {few:.2f} MB/s, -q {MANY_QPS} {many:.2f} MB/s, "
                         f"ratio {many / few if few > 0 else 0:.2f}; -q {MANY_QPS}: {sent} packets sent, "
                         f"{resent} resent, {timeouts} ACK timeouts\n")
        self.assertGreater(few, 0.0)
        self.assertGreaterEqual(many, MANY_QPS_MIN_RATIO * few,
                                f"{MANY_QPS} QPs reached {many:.2f} MB/s, {FEW_QPS} QPs {few:.2f} MB/s")
        self.assertLessEqual(resent, MANY_QPS_MAX_RESENT * sent,
                             f"{MANY_QPS} QPs sent {resent} of {sent} packets again ({timeouts} ACK timeouts)")

    def engine_totals(self):
        """The engine counters of the topology's daemons, summed."""
        total = {}
        for d in self.topo.daemons:
            for k, v in d.stats()["engine"].items():
                total[k] = total.get(k, 0) + v
        return total

    def check_lat(self, tool, size, iters, extra=()):
        row, detail = self.run_case(tool, size, iters, extra)
        t_min, t_avg, t_max = row.get("t_min[usec]"), row.get("t_avg[usec]"), row.get("t_max[usec]")
        self.assertTrue(None not in (t_min, t_avg, t_max), f"latency columns missing: {row}\n{detail}")
        self.assertTrue(0.0 < t_min <= t_avg <= t_max and math.isfinite(t_max), f"latencies {row}\n{detail}")


def add(name, fn):
    setattr(PerftestTests, name, fn)


for _tool in BW_TOOLS:
    for _size, _iters in BW_SIZES.items():
        add(f"test_{_tool}_{_size}B", lambda self, t=_tool, s=_size, n=_iters: self.check_bw(t, s, n))
for _tool in LAT_TOOLS:
    for _size, _iters in LAT_SIZES.items():
        add(f"test_{_tool}_{_size}B", lambda self, t=_tool, s=_size, n=_iters: self.check_lat(t, s, n))
for _atomic in ATOMICS:
    add(f"test_ib_atomic_bw_{_atomic}", lambda self, a=_atomic: self.check_bw("ib_atomic_bw", 8, ATOMIC_ITERS,
                                                                            ["-A", a]))
    add(f"test_ib_atomic_lat_{_atomic}", lambda self, a=_atomic: self.check_lat("ib_atomic_lat", 8, ATOMIC_ITERS,
                                                                              ["-A", a]))


add(f"test_ib_write_bw_{MANY_QPS}qps", lambda self: self.check_many_qps("ib_write_bw"))
add(f"test_ib_read_bw_{MANY_QPS}qps", lambda self: self.check_many_qps("ib_read_bw"))


def make_suite(topo):
    PerftestTests.topo = topo
    loader = unittest.TestLoader()
    only = os.environ.get("UROCE_DATAFLOW_ONLY")  # e.g. ib_read_bw: run the matching tests only
    return unittest.TestSuite(PerftestTests(n) for n in loader.getTestCaseNames(PerftestTests)
                              if not only or only in n)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--topology", choices=["loopback", "veth"], required=True)
    ap.add_argument("uroced")
    ap.add_argument("uroce")
    args = ap.parse_args()
    harness.set_binaries(args.uroced, args.uroce)
    return harness.run_tests(args.topology, TOOLS, make_suite)


if __name__ == "__main__":
    sys.exit(main())
