#!/usr/bin/env python3
"""UCX, unmodified (Debian's ucx-utils), through uroce: ucx_perftest over the
verbs transports only.

usage: test_ucx_perftest.py --topology {loopback,veth} UROCED UROCE

UCP tests (tag matching, put, get, active messages) run with UCX_TLS set to
rc_verbs,ud_verbs, then to the aliases rc_v and ud_v, and UCX_NET_DEVICES
naming the uroce device, so no shared-memory or TCP transport can carry the
data; UCT tests run one transport directly (-x rc_verbs / -x ud_verbs). Each
run has a fixed iteration count; it passes when both sides exit 0 and the
client's "Final:" row reports that many iterations with positive latency
(and bandwidth for bandwidth tests). The figures are printed. ucx_perftest
does not check data: tests/integration/dataflow/mpi_check.c does, through
Open MPI over UCX.
"""

import argparse
import os
import re
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import uroce_harness as harness  # noqa: E402

RUN_TIMEOUT = 30  # per run; each takes well under a second when it works
LAT_ITERS = 1000
BW_ITERS = 1000
LARGE_BW_ITERS = 100  # 64 KiB messages: UCX's rendezvous protocol (RDMA READ)
WARMUP = 50

# UCP tests: (ucx_perftest -t name, extra arguments, iterations, whether the
# bandwidth must show: 8-byte messages print it rounded to 0.00 MB/s when slow)
UCP_TESTS = [
    ("tag_lat", [], LAT_ITERS, False),
    ("tag_bw", [], BW_ITERS, False),
    ("tag_bw", ["-s", "65536"], LARGE_BW_ITERS, True),
    ("ucp_put_bw", [], BW_ITERS, False),
    ("ucp_get", [], BW_ITERS, False),
    ("ucp_am_lat", [], LAT_ITERS, False),
]
UCP_TLS = ["rc_verbs,ud_verbs", "rc_v", "ud_v"]
# UCT tests: (transport, -t name, extra arguments, iterations, bandwidth test?)
UCT_TESTS = [
    ("rc_verbs", "put_bw", [], BW_ITERS, False),
    ("rc_verbs", "get", ["-D", "zcopy", "-s", "4096"], BW_ITERS, True),
    ("rc_verbs", "am_lat", [], LAT_ITERS, False),
    ("ud_verbs", "am_lat", [], LAT_ITERS, False),
]

FINAL = re.compile(r"^Final:\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)",
                   re.M)
FIGURES = []  # (label, median latency us, average latency us, bandwidth MB/s, message rate /s)


def ucx_env(endpoint, tls):
    return ["env", f"UCX_TLS={tls}", f"UCX_NET_DEVICES={endpoint.device}:1", "UCX_WARN_UNUSED_ENV_VARS=n"]


class UcxPerftestTests(unittest.TestCase):
    topo = None  # set by make_suite

    def run_case(self, label, tls, args, iters, bandwidth):
        topo = self.topo
        port = harness.free_tcp_port()
        common = ["ucx_perftest", "-p", str(port), "-n", str(iters), "-w", str(WARMUP), *args]
        # The server takes its test parameters from the client.
        server = ucx_env(topo.server, tls) + ["ucx_perftest", "-p", str(port)]
        client = ucx_env(topo.client, tls) + common + [topo.server.tcp_host]
        result = harness.run_pair(topo, server, client, port, timeout=RUN_TIMEOUT)
        detail = result.describe()
        if not result.ok():
            self.fail(f"{label}: {result.summary()}\n{detail}")
        m = FINAL.search(result.client.output)
        self.assertIsNotNone(m, f"{label}: no Final row in the client's output\n{detail}")
        n, p50, avg, _overall, bw, _bw_overall, rate, _rate_overall = m.groups()
        sys.stderr.write(f"    {label}: {n} iterations, latency median {p50} us average {avg} us, "
                         f"{bw} MB/s, {rate} msg/s\n")
        FIGURES.append((label, float(p50), float(avg), float(bw), float(rate)))
        self.assertEqual(int(n), iters, detail)
        self.assertGreater(float(avg), 0.0, detail)
        self.assertGreater(float(rate), 0.0, detail)
        if bandwidth:
            self.assertGreater(float(bw), 0.0, detail)
        self.assertEqual(topo.dead_daemons(), [], topo.daemon_logs())


def add(name, fn):
    setattr(UcxPerftestTests, name, fn)


for _tls in UCP_TLS:
    for _test, _args, _iters, _bw in UCP_TESTS:
        _label = f"UCX_TLS={_tls} {_test} {' '.join(_args)}".strip()
        _name = f"test_ucp_{_tls.replace(',', '_')}_{_test}" + ("_" + "_".join(_args[1:]) if _args else "")
        add(_name, lambda self, t=_tls, a=["-t", _test, *_args], i=_iters, b=_bw, lab=_label:
            self.run_case(lab, t, a, i, b))

for _tl, _test, _args, _iters, _bw in UCT_TESTS:
    _label = f"UCT {_tl} {_test} {' '.join(_args)}".strip()


    def _uct(self, tl=_tl, test=_test, args=_args, iters=_iters, bw=_bw, lab=_label):
        # The server of a UCT test opens the device the client names, so both
        # sides need one device name: one daemon (loopback) only.
        if self.topo.server.device != self.topo.client.device:
            self.skipTest("UCT tests need the same device name on both sides (loopback topology)")
        self.run_case(lab, tl, ["-t", test, "-x", tl, "-d", f"{self.topo.client.device}:1", *args], iters, bw)

    add(f"test_uct_{_tl}_{_test}", _uct)


def make_suite(topo):
    UcxPerftestTests.topo = topo
    loader = unittest.TestLoader()
    only = os.environ.get("UROCE_DATAFLOW_ONLY")
    return unittest.TestSuite(UcxPerftestTests(n) for n in loader.getTestCaseNames(UcxPerftestTests)
                              if not only or only in n)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--topology", choices=["loopback", "veth"], required=True)
    ap.add_argument("uroced")
    ap.add_argument("uroce")
    args = ap.parse_args()
    harness.set_binaries(args.uroced, args.uroce)
    try:
        return harness.run_tests(args.topology, ["ucx_perftest", "env"], make_suite)
    finally:
        if FIGURES:
            sys.stderr.write(f"ucx_perftest figures ({args.topology}):\n")
            for label, p50, avg, bw, rate in FIGURES:
                sys.stderr.write(f"  {label:45s} median {p50:9.3f} us  avg {avg:9.3f} us  {bw:9.2f} MB/s  "
                                 f"{rate:11.0f} msg/s\n")


if __name__ == "__main__":
    sys.exit(main())
