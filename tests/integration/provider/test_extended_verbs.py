#!/usr/bin/env python3
"""The extended verbs (ibv_wr_* on ibv_qp_ex, ibv_cq_ex polling, completion
timestamps) through stock libibverbs and the provider, against one uroced on
the loopback port: the C program extended_verbs runs every operation and
accessor and checks data and fields itself (one line per check), and must
leave no object behind.

usage: test_extended_verbs.py UROCED UROCE DIR_OF_C_TESTS
Exit 77 (skipped) when the device node cannot be made (not root).
"""

import os
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from uroce_harness import Daemon  # noqa: E402

UROCED = UROCE = BIN = None
SKIP = 77
NAME = "uroce_xv"


class ExtendedVerbs(unittest.TestCase):
    def setUp(self):
        self.daemon = Daemon(UROCED, UROCE, name=NAME, ip="192.0.2.1")
        self.addCleanup(self.daemon.close)

    def test_every_wr_operation_and_cq_ex_accessor(self):
        r = subprocess.run(self.daemon.exec_argv(os.path.join(BIN, "extended_verbs")), capture_output=True,
                           text=True, timeout=120)
        print(r.stdout + r.stderr, file=sys.stderr)
        failed = [line for line in r.stdout.splitlines() if line.startswith("FAIL")]
        self.assertEqual(failed, [])
        self.assertEqual(r.returncode, 0)
        self.assertIn("0 failures", r.stdout)
        # Enough checks ran that none of the sections was skipped.
        self.assertGreater(sum(1 for line in r.stdout.splitlines() if line.startswith("ok")), 150)
        self.assertTrue(self.daemon.alive(), self.daemon.log_text())


def main():
    global UROCED, UROCE, BIN
    UROCED, UROCE, BIN = sys.argv[1:4]
    del sys.argv[1:4]
    if os.geteuid() != 0 and not os.path.lexists(f"/dev/infiniband/uverbs_{NAME}"):
        print(f"SKIP: not root and /dev/infiniband/uverbs_{NAME} does not exist (see docs/daemon.md)")
        return SKIP
    prog = unittest.main(exit=False, verbosity=2)
    return 0 if prog.result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main())
