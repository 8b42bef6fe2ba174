#!/usr/bin/env python3
"""Open MPI, unmodified (Debian's openmpi-bin), over UCX over uroce: the
project's mpi_check (ping-pong of 8 B to 1 MiB with every byte checked, and
an MPI_Allreduce checked element by element) with two ranks.

usage: test_mpi.py --topology {loopback,veth} UROCED UROCE MPI_CHECK

mpirun runs with --mca pml ucx and --mca btl ^vader,tcp,openib, and UCX with
UCX_TLS=rc_verbs,ud_verbs: no shared-memory or TCP transport can carry the
data, so it all goes through uroce, which the daemons' packet counters show.

loopback: both ranks on one uroced's device.
veth: one rank per namespace. mpirun starts in the first namespace; it
launches the second rank through its rsh agent, here a script that runs
Open MPI's daemon (orted) in the second namespace under `uroce exec` of the
second uroced, so that rank opens that device. The orted reaches mpirun over
TCP across the veth pair.
"""

import argparse
import json
import os
import stat
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import uroce_harness as harness  # noqa: E402

MPI_CHECK = None
RUN_TIMEOUT = 120  # the whole run takes a few seconds when it works
TLS = "rc_verbs,ud_verbs"
# No shared memory (vader), no TCP, no openib: only pml ucx moves data.
MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "2", "--mca", "pml", "ucx",
          "--mca", "btl", "^vader,tcp,openib", "-x", f"UCX_TLS={TLS}", "-x", "UCX_WARN_UNUSED_ENV_VARS=n"]
MIN_FRAMES = 1000  # 20 round trips of 1 MiB alone are over 40,000 frames of 1 KiB


def engine_packets(daemon):
    r = subprocess.run([daemon.uroce, "stats", "--json", "--state-dir", daemon.state, "--device", daemon.name],
                       capture_output=True, text=True, timeout=30)
    if r.returncode != 0:
        raise AssertionError(f"uroce stats failed: {r.stderr}")
    engine = json.loads(r.stdout)["engine"]
    return engine["tx_packets"] + engine["rx_packets"]


RSH_AGENT = """#!/bin/sh
# mpirun's rsh agent for the veth topology: "agent HOST COMMAND..." runs
# COMMAND (Open MPI's orted, as a shell command line) in HOST's namespace as
# a client of that namespace's uroced.
host="$1"; shift
case "$host" in
{cases}
  *) echo "rsh agent: unknown host $host" >&2; exit 1 ;;
esac
"""


class MpiTests(unittest.TestCase):
    topo = None  # set by make_suite

    def run_mpirun(self, argv):
        before = [engine_packets(d) for d in self.topo.daemons]
        prog = harness.start_program("mpirun", argv)
        try:
            prog.proc.wait(timeout=RUN_TIMEOUT)
            why = None
        except subprocess.TimeoutExpired:
            why = f"still running after {RUN_TIMEOUT} s"
        side = prog.finish(why or "finished")
        sys.stderr.write(harness.tail(side.output, 20) + "\n")
        detail = f"{side.describe()}\n{self.topo.daemon_logs()}"
        self.assertIsNone(why, detail)
        self.assertEqual(side.returncode, 0, detail)
        self.assertIn("mpi_check: OK", side.output, detail)
        self.assertIn("ping-pong 1048576 bytes", side.output, detail)
        self.assertIn("allreduce of 100000 int64 over 2 ranks: every element checked", side.output, detail)
        after = [engine_packets(d) for d in self.topo.daemons]
        for d, b, a in zip(self.topo.daemons, before, after):
            sys.stderr.write(f"    {d.name}: {a - b} RoCE packets sent and received during the run\n")
            self.assertGreater(a - b, MIN_FRAMES, f"{d.name} carried almost nothing: the data went another way")
        self.assertEqual(self.topo.dead_daemons(), [], self.topo.daemon_logs())

    def test_two_ranks_ping_pong_and_allreduce(self):
        topo = self.topo
        if topo.kind == "loopback":
            d = topo.daemons[0]
            argv = d.exec_argv(*MPIRUN, "-x", f"UCX_NET_DEVICES={d.name}:1", MPI_CHECK)
            self.run_mpirun(argv)
            return
        # veth: rank 0 in the first namespace (mpirun's own), rank 1 in the second.
        a, b = topo.daemons
        with tempfile.TemporaryDirectory(prefix="uroce-mpi-") as tmp:
            agent = os.path.join(tmp, "rsh_agent")
            cases = "\n".join(
                f"  {ip}) exec ip netns exec {d.netns} {d.uroce} exec --state-dir {d.state} -- sh -c \"$*\" ;;"
                for ip, d in zip(topo.net.ip, (a, b)))
            with open(agent, "w") as f:
                f.write(RSH_AGENT.format(cases=cases))
            os.chmod(agent, stat.S_IRWXU)
            hosts = ",".join(topo.net.ip)
            argv = a.exec_argv(*MPIRUN, "--host", hosts, "--map-by", "node",
                               "--mca", "plm_rsh_agent", agent,
                               # orted and mpirun talk over the veth, not over lo or other interfaces.
                               "--mca", "oob_tcp_if_include", f"{topo.net.ip[0].rsplit('.', 1)[0]}.0/24",
                               MPI_CHECK)
            self.run_mpirun(argv)


def make_suite(topo):
    MpiTests.topo = topo
    loader = unittest.TestLoader()
    return unittest.TestSuite(MpiTests(n) for n in loader.getTestCaseNames(MpiTests))


def main():
    global MPI_CHECK
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--topology", choices=["loopback", "veth"], required=True)
    ap.add_argument("uroced")
    ap.add_argument("uroce")
    ap.add_argument("mpi_check")
    args = ap.parse_args()
    MPI_CHECK = os.path.abspath(args.mpi_check)
    harness.set_binaries(args.uroced, args.uroce)
    return harness.run_tests(args.topology, ["mpirun", "sh"], make_suite)


if __name__ == "__main__":
    sys.exit(main())
