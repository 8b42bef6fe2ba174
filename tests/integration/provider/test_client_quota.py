#!/usr/bin/env python3
"""One client cannot exhaust the daemon for the others (docs/security.md):
cq_flood creates up to 70,000 CQs through the provider and stops at its first
failure, which must be EDQUOT or ENOMEM; while it holds them, another client
creates a CQ, and the daemon's mappings stay within vm.max_map_count.

usage: test_client_quota.py UROCED UROCE DIR_OF_C_TESTS
Exit 77 (skipped) when the device node cannot be made (not root).
"""

import errno
import os
import re
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "daemon"))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from uroce_control import Client  # noqa: E402
from uroce_harness import Daemon as HarnessDaemon  # noqa: E402

UROCED = UROCE = BIN = None
SKIP = 77
NODE = "/dev/infiniband/uverbs_uroce0"


class CqFlood(unittest.TestCase):
    def setUp(self):
        self.daemon = HarnessDaemon(UROCED, UROCE, name="uroce0", ip="192.0.2.1")
        self.addCleanup(self.daemon.close)
        self.state = self.daemon.state
        self.proc = self.daemon.proc

    def test_70000_cqs_leave_room_for_another_client(self):
        argv = [UROCE, "exec", "--state-dir", self.state, "--", os.path.join(BIN, "cq_flood"), "70000"]
        flood = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        try:
            first = flood.stdout.readline()
            self.assertEqual(flood.stdout.readline().strip(), "holding", first)
            print(first, file=sys.stderr)
            m = re.match(r"created (\d+); errno (\d+)", first)
            self.assertIsNotNone(m, first)
            self.assertIn(int(m.group(2)), (errno.EDQUOT, errno.ENOMEM), first)
            self.assertGreater(int(m.group(1)), 1000, "the quota leaves a client room to work")
            # Meanwhile, another client.
            other = Client(os.path.join(self.state, "uroce0.sock"))
            try:
                self.assertEqual(other.hello()[0], 0)
                status, _cq, _cqe, _bytes, fds = other.create_cq(16)
                self.assertEqual(status, 0)
                for fd in fds:
                    os.close(fd)
            finally:
                other.close()
            with open(f"/proc/{self.proc.pid}/maps") as f:
                maps = sum(1 for _ in f)
            with open("/proc/sys/vm/max_map_count") as f:
                self.assertLess(maps, int(f.read()))
        finally:
            flood.stdin.close()
            flood.wait(timeout=120)
        self.assertEqual(flood.returncode, 0)
        self.assertIsNone(self.proc.poll(), "the daemon still runs")


def main():
    global UROCED, UROCE, BIN
    UROCED, UROCE, BIN = sys.argv[1:4]
    del sys.argv[1:4]
    if os.geteuid() != 0 and not os.path.lexists(NODE):
        print(f"SKIP: not root and {NODE} does not exist (see docs/daemon.md for the recipe)")
        return SKIP
    prog = unittest.main(exit=False, verbosity=2)
    return 0 if prog.result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main())
