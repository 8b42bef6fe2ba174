#!/usr/bin/env python3
"""Multicast through uroce: rdmacm-utils' mckey, unmodified, joins an IPv4
group (rdma_join_multicast: JOIN_IP_MCAST, MULTICAST_JOIN, and librdmacm's
own ibv_attach_mcast) and sends UD messages to it; every receiver must get
every message (mckey's receiver exits only once it has polled -C
completions). veth: a receiver in each namespace and the sender in the
second, so one copy crosses the wire to the first daemon (group MAC
01:00:5e:01:01:01) and one reaches the sender daemon's other QP without
leaving it; then mcast_check (the provider suite's verbs program: two QPs
attached to a group get byte-exact copies, detach stops delivery, an RC QP
is refused) against the first namespace's daemon, whose port has a wire.
loopback: the receiver and the sender on one daemon.

usage: test_multicast.py --topology loopback|veth UROCED UROCE MCAST_CHECK
Exit 77 (skipped) when not root or mckey is missing.
"""

import argparse
import os
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import uroce_harness as harness  # noqa: E402

GROUP = "239.1.1.1"
MESSAGES = 20   # mckey's sender posts them all, then leaves and destroys its QP
RUN_SECONDS = 60
READY_SECONDS = 30
READY_SIGN = "receiving data transfers"  # printed once the receiver's QP is attached
DONE_SIGN = "data transfers complete"


class Receiver:
    """An mckey receiver, started and waited for until its QP is attached."""

    def __init__(self, daemon, ip):
        self.log = tempfile.TemporaryFile(mode="w+")
        self.proc = subprocess.Popen(daemon.exec_argv("mckey", "-m", GROUP, "-b", ip, "-C", str(MESSAGES)),
                                     stdout=self.log, stderr=subprocess.STDOUT, text=True)

    def output(self):
        self.log.seek(0)
        return self.log.read()

    def wait_ready(self):
        deadline = time.monotonic() + READY_SECONDS
        while time.monotonic() < deadline and self.proc.poll() is None:
            if READY_SIGN in self.output():
                return True
            time.sleep(0.02)
        return READY_SIGN in self.output()

    def finish(self):
        try:
            self.proc.wait(timeout=RUN_SECONDS)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        return self.proc.returncode, self.output()

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


class Multicast(unittest.TestCase):
    topo = None
    mcast_check = None

    def receiver(self, endpoint):
        r = Receiver(endpoint.daemon, endpoint.daemon.ip)
        self.addCleanup(r.close)
        self.assertTrue(r.wait_ready(), f"mckey receiver never attached:\n{harness.tail(r.output())}\n"
                                        f"{self.topo.daemon_logs()}")
        return r

    def test_mckey_every_receiver_gets_every_message(self):
        receivers = [self.receiver(self.topo.server)]
        if self.topo.client.daemon is not self.topo.server.daemon:
            receivers.append(self.receiver(self.topo.client))  # beside the sender, on its daemon
        sender = subprocess.run(self.topo.client.daemon.exec_argv(
            "mckey", "-m", GROUP, "-s", "-b", self.topo.client.daemon.ip, "-C", str(MESSAGES)),
            capture_output=True, text=True, timeout=RUN_SECONDS)
        why = f"sender:\n{harness.tail(sender.stdout + sender.stderr)}"
        self.assertEqual(sender.returncode, 0, why + "\n" + self.topo.daemon_logs())
        self.assertIn(DONE_SIGN, sender.stdout, why)
        for r in receivers:
            rc, out = r.finish()
            detail = f"receiver:\n{harness.tail(out)}\n{why}\n{self.topo.daemon_logs()}"
            self.assertEqual(rc, 0, detail)
            self.assertIn(DONE_SIGN, out, detail)
        self.assertEqual(self.topo.dead_daemons(), [])

    def test_verbs_program_on_a_wire_port(self):
        if self.topo.net is None:
            self.skipTest("the loopback daemon runs mcast_check in the provider suite")
        r = subprocess.run(self.topo.server.daemon.exec_argv(self.mcast_check), capture_output=True, text=True,
                           timeout=RUN_SECONDS)
        out = r.stdout + r.stderr
        failed = [line for line in r.stdout.splitlines() if line.startswith("FAIL")]
        self.assertEqual(failed, [], out + self.topo.daemon_logs())
        self.assertEqual(r.returncode, 0, out)
        self.assertIn("0 failures", r.stdout)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--topology", choices=["loopback", "veth"], required=True)
    ap.add_argument("uroced")
    ap.add_argument("uroce")
    ap.add_argument("mcast_check")
    args = ap.parse_args()
    harness.set_binaries(args.uroced, args.uroce)
    Multicast.mcast_check = os.path.abspath(args.mcast_check)

    def suite(topo):
        Multicast.topo = topo
        return unittest.defaultTestLoader.loadTestsFromTestCase(Multicast)

    return harness.run_tests(args.topology, ["mckey"], suite)


if __name__ == "__main__":
    sys.exit(main())
