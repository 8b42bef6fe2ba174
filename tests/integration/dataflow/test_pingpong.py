#!/usr/bin/env python3
"""The rdma-core example programs, unmodified, moving data through uroce.

usage: test_pingpong.py --topology {loopback,veth} UROCED UROCE

ibv_rc_pingpong (1 B to 1 MiB, with and without -e), ibv_uc_pingpong,
ibv_ud_pingpong and ibv_srq_pingpong, -n 1000, each with -c (the receiver
checks the buffer it got) and the RoCE v2 GID of the daemon's IPv4 address.
A run passes when both sides exit 0, each names the other's GID, both report
"N bytes in" with N = size * iterations * 2 and the requested iteration
count, and neither reports invalid data or a failed completion.

ibv_rc_pingpong also runs with -N (the ibv_wr_* send API of an extended QP,
with and without -e) and -t (an extended CQ with completion timestamps; the
run must then print its receive-completion clock figures, max >= average >=
min > 0), and with on-demand paging: -o (an ON_DEMAND MR, which it uses only
when odp_caps say RC send/recv work with it), -o -O (implicit ODP: one MR for
the whole address space) and -o -P (ibv_advise_mr PREFETCH_WRITE with FLUSH
before the run; "Couldn't prefetch" fails it).

Topologies (uroce_harness.Topology): one uroced on the loopback port, or one
uroced per network namespace on net_af_packet over a veth pair. Exit 77
(skipped), with the reason, without root or the tools.
"""

import argparse
import os
import re
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import uroce_harness as harness  # noqa: E402

ITERS = 1000
TOOLS = ["ibv_rc_pingpong", "ibv_uc_pingpong", "ibv_ud_pingpong", "ibv_srq_pingpong"]


def run_timeout(size):
    """Per run, only to turn a hang into a failure: a 1 MiB ping-pong moves
    2 GiB in 2 million packets (17 s at 1 Gbit/s)."""
    return 150 if size > 65536 else 60


# (program, message size, events): sizes across the 1024-byte path MTU of a
# 1500-byte Ethernet, up to 1 MiB for RC. UD messages fit one MTU.
CASES = (
    [("ibv_rc_pingpong", size, events) for size in (1, 1025, 4096, 65536, 1 << 20) for events in (False, True)]
    + [("ibv_uc_pingpong", 1, False), ("ibv_uc_pingpong", 4096, False), ("ibv_uc_pingpong", 4096, True)]
    + [("ibv_ud_pingpong", 1, False), ("ibv_ud_pingpong", 1024, False), ("ibv_ud_pingpong", 1024, True)]
    + [("ibv_srq_pingpong", 4096, False), ("ibv_srq_pingpong", 4096, True)]
)

# (program, message size, events, extra flag): the extended verbs (issue 12).
# -t runs without -e: with both, ibv_rc_pingpong fails ("poll CQ failed 2")
# whenever an event arrives for a completion its previous ibv_next_poll
# already took (armed, then a second CQE written before that poll), a race
# of the program's loop that any device has; its ibv_poll_cq loop tolerates
# such an event, its ibv_start_poll loop does not.
EXTENDED_CASES = ([("ibv_rc_pingpong", size, events, "-N") for size in (1, 4096, 65536) for events in (False, True)]
                  + [("ibv_rc_pingpong", size, False, "-t") for size in (1, 4096, 65536)]
                  + [("ibv_rc_pingpong", 4096, False, "-o"), ("ibv_rc_pingpong", 4096, False, "-o -O"),
                     ("ibv_rc_pingpong", 4096, False, "-o -P"), ("ibv_rc_pingpong", 65536, False, "-o -O -P")])

FAILURE_LINES = re.compile(r"(?m)^.*(invalid data in page|Failed status|Couldn't|Failed to|poll CQ failed|"
                           r"parse WC failed).*$")


def gid_text(ip):
    return f"::ffff:{ip}"


def pingpong_argv(endpoint, program, size, events, tcp_port, flag=None):
    argv = [program, "-d", endpoint.device, "-g", str(endpoint.gid_index), "-p", str(tcp_port), "-s", str(size),
            "-n", str(ITERS), "-c"] + (flag.split() if flag else [])
    if program != "ibv_ud_pingpong":  # UD has no path MTU
        argv += ["-m", str(endpoint.mtu)]
    if events:
        argv.append("-e")
    return argv


def check_pingpong(test, result, size, own_ip, peer_ip):
    """The assertions every pingpong run shares; `result` is a PairResult."""
    detail = result.describe()
    if not result.ok():
        test.fail(f"{result.summary()}\n{detail}")
    for side, mine, theirs in ((result.server, own_ip[0], peer_ip[0]), (result.client, own_ip[1], peer_ip[1])):
        out = side.output
        bad = FAILURE_LINES.findall(out)
        test.assertEqual(bad, [], f"{side.role} reported a failure\n{detail}")
        local = re.search(r"local address:.*GID (\S+)", out)
        remote = re.search(r"remote address:.*GID (\S+)", out)
        test.assertTrue(local and remote, f"{side.role}: no local/remote address lines\n{detail}")
        test.assertEqual(local.group(1), gid_text(mine), f"{side.role}: local GID\n{detail}")
        test.assertEqual(remote.group(1), gid_text(theirs), f"{side.role}: remote GID\n{detail}")
        moved = re.search(r"(?m)^(\d+) bytes in ([\d.]+) seconds = ([\d.]+) Mbit/sec$", out)
        iters = re.search(r"(?m)^(\d+) iters in ([\d.]+) seconds = ([\d.]+) usec/iter$", out)
        test.assertTrue(moved and iters, f"{side.role}: no throughput lines\n{detail}")
        test.assertEqual(int(iters.group(1)), ITERS, detail)
        test.assertEqual(int(moved.group(1)), size * ITERS * 2, detail)
        # No assertion on the rate: the program prints it with two decimals,
        # so 2000 bytes moved in over 3.2 s (a loaded machine) print 0.00.


class PingpongTests(unittest.TestCase):
    topo = None  # set by make_suite

    def run_case(self, program, size, events, flag=None):
        topo = self.topo
        port = harness.free_tcp_port()
        server = pingpong_argv(topo.server, program, size, events, port, flag)
        client = pingpong_argv(topo.client, program, size, events, port, flag) + [topo.server.tcp_host]
        result = harness.run_pair(topo, server, client, port, timeout=run_timeout(size))
        sys.stderr.write(f"    {program} -s {size}{' -e' if events else ''}{' ' + flag if flag else ''}: server exit "
                         f"{result.server.returncode}, client exit {result.client.returncode}\n")
        ips = (topo.server.daemon.ip, topo.client.daemon.ip)
        check_pingpong(self, result, size, own_ip=ips, peer_ip=ips[::-1])
        if flag == "-t":
            for side in (result.server, result.client):
                check_completion_clock(self, side.output, result.describe())
        self.assertEqual(topo.dead_daemons(), [], topo.daemon_logs())
        return result


def check_completion_clock(test, out, detail):
    """ibv_rc_pingpong -t prints the spread of the device clock between
    successive receive completions (read_completion_ts)."""
    figures = {}
    for kind in ("Max", "Min", "Average"):
        m = re.search(rf"(?m)^{kind} receive completion clock cycles = ([\d.]+)$", out)
        test.assertIsNotNone(m, f"no {kind} completion clock line\n{detail}")
        figures[kind] = float(m.group(1))
    sys.stderr.write(f"      receive completion clock (ns): min {figures['Min']:.0f} average {figures['Average']:.0f} "
                     f"max {figures['Max']:.0f}\n")
    test.assertGreater(figures["Min"], 0, detail)
    test.assertTrue(figures["Min"] <= figures["Average"] <= figures["Max"], f"{figures}\n{detail}")


def add_case(program, size, events, flag=None):
    suffix = {None: "", "-N": "_new_send", "-t": "_timestamps", "-o": "_odp", "-o -O": "_implicit_odp",
              "-o -P": "_odp_prefetch", "-o -O -P": "_implicit_odp_prefetch"}[flag]
    name = f"test_{program.removeprefix('ibv_')}_{size}B{'_events' if events else ''}{suffix}"
    setattr(PingpongTests, name, lambda self: self.run_case(program, size, events, flag))


for _case in CASES + EXTENDED_CASES:
    add_case(*_case)


class TopologyTests(unittest.TestCase):
    """Before any data: each side's stock ibv_devices and ibv_devinfo, run
    where that side's programs run (its namespace, through uroce exec), see
    its own device, port active, with its IPv4 address as the RoCE v2 GID the
    programs are given."""

    topo = None

    def test_each_side_sees_its_device(self):
        for role, endpoint in (("server", self.topo.server), ("client", self.topo.client)):
            with self.subTest(side=role):
                d = endpoint.daemon
                r = subprocess.run(d.exec_argv("ibv_devices"), capture_output=True, text=True, timeout=60)
                self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
                self.assertRegex(r.stdout, rf"(?m)^\s*{re.escape(endpoint.device)}\s+[0-9a-f]{{16}}\s*$")
                r = subprocess.run(d.exec_argv("ibv_devinfo", "-v", "-d", endpoint.device), capture_output=True,
                                   text=True, timeout=60)
                self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
                self.assertRegex(r.stdout, r"state:\s*PORT_ACTIVE")
                self.assertRegex(r.stdout, rf"active_mtu:\s*{endpoint.mtu} ")
                self.assertRegex(r.stdout, rf"GID\[\s*{endpoint.gid_index}\]:\s*{re.escape(gid_text(d.ip))}, RoCE v2")


class KernelStaysQuietTests(unittest.TestCase):
    """veth only: the kernels in the namespaces see every RoCE frame too (an
    af_packet port does not take frames away from the stack); they must not
    answer them with ICMP port-unreachable (issue 5, Port)."""

    topo = None

    def test_no_icmp_unreachable_for_roce(self):
        topo = self.topo
        before = [topo.net.snmp(ns) for ns in topo.net.ns]
        PingpongTests.run_case(self, "ibv_rc_pingpong", 4096, False)
        after = [topo.net.snmp(ns) for ns in topo.net.ns]
        for ns, b, a in zip(topo.net.ns, before, after):
            sent = a["Icmp"]["OutDestUnreachs"] - b["Icmp"]["OutDestUnreachs"]
            noports = a["Udp"]["NoPorts"] - b["Udp"]["NoPorts"]
            self.assertEqual((sent, noports), (0, 0), f"{ns}: the kernel sent {sent} ICMP destination unreachable "
                             f"and counted {noports} UDP datagrams to no port during a pingpong")


class OneDevice:
    """Both programs of a pair on one daemon of `topo` (its namespace, TCP
    over 127.0.0.1): for run_pair."""

    def __init__(self, topo, daemon):
        self.topo = topo
        self.server = self.client = harness.Endpoint(daemon, "127.0.0.1")

    def dead_daemons(self):
        return self.topo.dead_daemons()

    def daemon_logs(self):
        return self.topo.daemon_logs()


class OneDeviceTests(unittest.TestCase):
    """veth only: two QPs of one device on a port with a wire, connected to
    each other (the device's own GID as the destination). The wire does not
    bring a NIC's own frames back; the daemon must deliver them itself, as
    rdma_rxe and hardware RoCE devices do."""

    topo = None

    def test_rc_pingpong_within_one_device(self):
        one = OneDevice(self.topo, self.topo.daemons[0])
        port = harness.free_tcp_port()
        server = pingpong_argv(one.server, "ibv_rc_pingpong", 4096, False, port)
        client = pingpong_argv(one.client, "ibv_rc_pingpong", 4096, False, port) + ["127.0.0.1"]
        result = harness.run_pair(one, server, client, port, timeout=run_timeout(4096))
        ip = one.server.daemon.ip
        check_pingpong(self, result, 4096, own_ip=(ip, ip), peer_ip=(ip, ip))


def make_suite(topo):
    PingpongTests.topo = topo
    TopologyTests.topo = topo
    KernelStaysQuietTests.topo = topo
    OneDeviceTests.topo = topo
    loader = unittest.TestLoader()
    suite = unittest.TestSuite()
    only = os.environ.get("UROCE_DATAFLOW_ONLY")  # e.g. rc_pingpong_4096B: run the matching tests only
    classes = [TopologyTests, PingpongTests] + ([KernelStaysQuietTests, OneDeviceTests] if topo.kind == "veth" else [])
    for cls in classes:
        for name in loader.getTestCaseNames(cls):
            if not only or only in name:
                suite.addTest(cls(name))
    return suite


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
