#!/usr/bin/env python3
"""A peer's daemon SIGKILLed mid-transfer: the survivor's outstanding work
requests complete, the first with IBV_WC_RETRY_EXC_ERR and the rest with
IBV_WC_WR_FLUSH_ERR, within the time its QP's timeout and retry_cnt give,
and the program exits.

usage: test_peer_daemon_killed.py UROCED UROCE PEER_GONE

Two network namespaces joined by a veth pair, a uroced on net_af_packet in
each (uroce_harness.Topology "veth"). peer_gone (peer_gone.c) serves a 1 MiB
MR in the first; its client in the second keeps 16 RDMA WRITEs outstanding
on an RC QP with local ACK timeout 14 (IBTA 9.7.6.1.3: 4.096 us * 2^14 =
67 ms) and retry_cnt 7 (what ibv_rc_pingpong uses) or 1. Once 200 WRITEs
have completed the test SIGKILLs the first namespace's uroced and notes the
time (CLOCK_MONOTONIC, which the program prints too).

IBTA 9.7.6.1.3: the requester waits one timeout for an ACK, then retries up
to retry_cnt times, each again waiting one timeout; so the error comes
(retry_cnt + 1) timeouts after the last ACK, which came before the kill.
The test allows RETRY_MARGIN_FACTOR times that plus RETRY_MARGIN_SECONDS
(the engine checks timers from its poll loop, and three programs and two
daemons share two cores), and asks that it come no sooner than
RETRY_FLOOR_FACTOR times it after the last successful completion (so the
retries happened). Exit 77 (skipped) without root.
"""

import argparse
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
import uroce_harness as harness  # noqa: E402

PEER_GONE = None
IBV_WC_WR_FLUSH_ERR = 5
IBV_WC_RETRY_EXC_ERR = 12
ACK_TIMEOUT = 14
RETRY_MARGIN_FACTOR = 1.25
RETRY_MARGIN_SECONDS = 0.5
RETRY_FLOOR_FACTOR = 0.8
START_SECONDS = 60     # until the client has moved 200 WRITEs
EXIT_GRACE_SECONDS = 10  # after the bound, for the remaining completions and exit


def ack_timeout_seconds(timeout):
    """IBTA 9.7.6.1.3: 4.096 us * 2^timeout."""
    return 4.096e-6 * (1 << timeout)


class Program:
    """A program whose output is collected in a file the test can read while it runs."""

    def __init__(self, argv):
        self.out = tempfile.NamedTemporaryFile(mode="w+", prefix="peer_gone-")
        self.proc = subprocess.Popen(argv, stdout=self.out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        self.argv = argv

    def text(self):
        with open(self.out.name) as f:
            return f.read()

    def wait_for(self, marker, seconds):
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if marker in self.text():
                return True
            if self.proc.poll() is not None:
                return marker in self.text()
            time.sleep(0.005)
        return False

    def wait_exit(self, seconds):
        try:
            return self.proc.wait(timeout=seconds)
        except subprocess.TimeoutExpired:
            return None

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        self.out.close()


class PeerDaemonKilledTests(unittest.TestCase):
    def run_case(self, retry_cnt):
        topo = harness.Topology("veth", *harness._binaries())
        server = client = None
        try:
            port = harness.free_tcp_port()
            s, c = topo.server, topo.client
            server = Program(s.daemon.exec_argv(PEER_GONE, "-d", s.device, "-g", str(s.gid_index), "-p", str(port)))
            self.assertTrue(harness.wait_listening(port, server.proc), server.text())
            client = Program(c.daemon.exec_argv(PEER_GONE, "-d", c.device, "-g", str(c.gid_index), "-p", str(port),
                                                "-t", str(ACK_TIMEOUT), "-r", str(retry_cnt), s.tcp_host))
            moving = client.wait_for("transferring", START_SECONDS)
            self.assertTrue(moving, f"no data moved\n{client.text()}\n{server.text()}\n{topo.daemon_logs()}")

            killed_at = time.monotonic()
            s.daemon.proc.send_signal(signal.SIGKILL)
            bound = (retry_cnt + 1) * ack_timeout_seconds(ACK_TIMEOUT)
            allowed = bound * RETRY_MARGIN_FACTOR + RETRY_MARGIN_SECONDS
            code = client.wait_exit(allowed + EXIT_GRACE_SECONDS)
            exited_after = time.monotonic() - killed_at
            out = client.text()
            detail = f"client: {' '.join(client.argv)}\n{out}\n{topo.daemon_logs()}"
            self.assertIsNotNone(code, f"the survivor still runs {exited_after:.1f} s after its peer's daemon died "
                                       f"(retry_cnt {retry_cnt}: the error was due after {bound:.3f} s)\n{detail}")
            self.assertEqual(code, 0, detail)

            errors = [(int(k), int(status), float(at)) for k, status, at in
                      re.findall(r"(?m)^error (\d+) status .* \((\d+)\) at ([\d.]+)$", out)]
            outstanding = int(re.search(r"(?m)^outstanding at the first error (\d+)$", out).group(1))
            last_success = float(re.search(r"(?m)^last success at ([\d.]+)$", out).group(1))
            self.assertEqual([k for k, _, _ in errors], list(range(1, outstanding + 1)), detail)
            self.assertEqual(errors[0][1], IBV_WC_RETRY_EXC_ERR, f"the first failed completion\n{detail}")
            self.assertEqual({st for _, st, _ in errors[1:]} - {IBV_WC_WR_FLUSH_ERR}, set(),
                             f"the completions after the first\n{detail}")
            error_after_kill = errors[0][2] - killed_at
            error_after_ack = errors[0][2] - last_success
            sys.stderr.write(f"    retry_cnt {retry_cnt}: RETRY_EXC_ERR {error_after_kill:.3f} s after the kill, "
                             f"{error_after_ack:.3f} s after the last success (IBTA: {bound:.3f} s, allowed "
                             f"{allowed:.3f} s); {outstanding - 1} flushed; the program exited after "
                             f"{exited_after:.3f} s\n")
            self.assertLessEqual(error_after_kill, allowed, detail)
            self.assertGreaterEqual(error_after_ack, bound * RETRY_FLOOR_FACTOR,
                                    f"the error came before retry_cnt retries could have been sent\n{detail}")
            self.assertTrue(topo.daemons[1].alive(), f"the survivor's uroced died\n{topo.daemon_logs()}")
        finally:
            for p in (client, server):
                if p is not None:
                    p.close()
            topo.close()

    def test_retry_cnt_1(self):
        self.run_case(1)

    def test_retry_cnt_7(self):
        """7 is a count like any other (IBTA 9.7.6.1.3); only rnr_retry 7 means forever."""
        self.run_case(7)


def main():
    global PEER_GONE
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("uroced")
    ap.add_argument("uroce")
    ap.add_argument("peer_gone")
    args = ap.parse_args()
    PEER_GONE = os.path.abspath(args.peer_gone)
    harness.set_binaries(args.uroced, args.uroce)
    reason = harness.skip_reason("veth", [])
    if reason:
        print(f"SKIP: {reason}")
        return harness.SKIP
    suite = unittest.TestLoader().loadTestsFromTestCase(PeerDaemonKilledTests)
    return 0 if unittest.TextTestRunner(verbosity=2, stream=sys.stderr).run(suite).wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main())
