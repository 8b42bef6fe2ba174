#!/usr/bin/env python3
"""One of the C test programs of this directory that check a verb's rules
themselves (one "ok"/"FAIL" line per check, "N failures" at the end),
through stock libibverbs and the provider, against one uroced on the loopback
port; the daemon must stay up. Used for mw_bind (ibv_bind_mw posted on the
send queue, with its completion) and odp_advise (odp_caps, ibv_advise_mr).

usage: test_verbs_program.py UROCED UROCE DIR_OF_C_TESTS PROGRAM MIN_CHECKS [ARG...]
The ARGs go to the program. Exit 77 (skipped) when the device node cannot be
made (not root), or when the program itself exits 77 after a "SKIP: reason"
line (something it needs is missing here).
"""

import os
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from uroce_harness import Daemon  # noqa: E402

UROCED = UROCE = BIN = PROGRAM = None
ARGS = []
MIN_CHECKS = 0
SKIP = 77
NAME = None  # uroce_<program>: each program its own device, so they may run in parallel


class VerbsProgram(unittest.TestCase):
    def setUp(self):
        self.daemon = Daemon(UROCED, UROCE, name=NAME, ip="192.0.2.1")
        self.addCleanup(self.daemon.close)

    def test_program_checks_pass(self):
        r = subprocess.run(self.daemon.exec_argv(os.path.join(BIN, PROGRAM), *ARGS), capture_output=True,
                           text=True, timeout=60)
        print(r.stdout + r.stderr, file=sys.stderr)
        skips = [line for line in r.stdout.splitlines() if line.startswith("SKIP:")]
        if r.returncode == SKIP and skips:
            self.skipTest(skips[0])
        failed = [line for line in r.stdout.splitlines() if line.startswith("FAIL")]
        self.assertEqual(failed, [])
        self.assertEqual(r.returncode, 0)
        self.assertIn("0 failures", r.stdout)
        # Enough checks ran that no section was skipped.
        self.assertGreaterEqual(sum(1 for line in r.stdout.splitlines() if line.startswith("ok")), MIN_CHECKS)
        self.assertTrue(self.daemon.alive(), self.daemon.log_text())


def main():
    global UROCED, UROCE, BIN, PROGRAM, MIN_CHECKS, NAME, ARGS
    UROCED, UROCE, BIN, PROGRAM = sys.argv[1:5]
    MIN_CHECKS = int(sys.argv[5])
    ARGS = sys.argv[6:]
    NAME = "uroce_" + (PROGRAM.replace("_", "")[:8] + "".join(ARGS))[:12]
    del sys.argv[1:]
    if os.geteuid() != 0 and not os.path.lexists(f"/dev/infiniband/uverbs_{NAME}"):
        print(f"SKIP: not root and /dev/infiniband/uverbs_{NAME} does not exist (see docs/daemon.md)")
        return SKIP
    prog = unittest.main(exit=False, verbosity=2)
    if prog.result.wasSuccessful() and prog.result.skipped and len(prog.result.skipped) == prog.result.testsRun:
        print(prog.result.skipped[0][1])  # the program's "SKIP: reason" line
        return SKIP
    return 0 if prog.result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main())
