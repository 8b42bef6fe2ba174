#!/usr/bin/env python3
"""The RDMA sanitizer (docs/sanitizer.md) through stock libibverbs, against
one uroced on the loopback port: the C program sanitize_bugs commits each
bug on purpose under `uroce exec --sanitize` and exactly that finding must be
reported, once; its correct scenario, ibv_rc_pingpong and perftest's
bandwidth tools (correct programs, with their scratch-buffer idioms) must
run to the end with no report at all.

usage: test_sanitizer.py UROCED UROCE DIR_OF_C_TESTS
Exit 77 (skipped) when the device node cannot be made (not root).
"""

import os
import re
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from uroce_harness import Daemon, free_tcp_port, missing_tools, wait_listening  # noqa: E402

UROCED = UROCE = BIN = None
SKIP = 77
NAME = "uroce_san"
REPORT = re.compile(r"^uroce-sanitizer\[\d+\]: ([a-z-]+): ", re.M)

# Scenario of sanitize_bugs -> the one finding it must produce.
BUGS = {
    "send-changed": "send-buffer-changed",
    "recv-written": "receive-buffer-written",
    "dereg-in-flight": "mr-deregistered-in-flight",
    "overlapping-recvs": "overlapping-receives",
    "read-overlap": "device-write-overlap",
    "cq-overrun": "cq-may-overrun",
}


class Sanitizer(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.daemon = Daemon(UROCED, UROCE, name=NAME, ip="192.0.2.1")

    @classmethod
    def tearDownClass(cls):
        cls.daemon.close()

    def sanitized(self, *argv):
        return ["stdbuf", "-oL", "-eL", UROCE, "exec", "--sanitize", "--state-dir", self.daemon.state, "--", *argv]

    def run_scenario(self, scenario):
        r = subprocess.run(self.sanitized(os.path.join(BIN, "sanitize_bugs"), scenario), capture_output=True,
                           text=True, timeout=120)
        print(r.stdout + r.stderr, file=sys.stderr)
        self.assertEqual([line for line in r.stdout.splitlines() if line.startswith("FAIL")], [])
        self.assertEqual(r.returncode, 0)
        return REPORT.findall(r.stderr)

    def test_each_bug_is_reported_once_by_name(self):
        for scenario, finding in BUGS.items():
            with self.subTest(scenario=scenario):
                self.assertEqual(self.run_scenario(scenario), [finding])

    def test_correct_use_of_every_verb_is_not_reported(self):
        self.assertEqual(self.run_scenario("clean"), [])

    def test_without_sanitize_nothing_is_reported(self):
        r = subprocess.run(self.daemon.exec_argv(os.path.join(BIN, "sanitize_bugs"), "send-changed"),
                           capture_output=True, text=True, timeout=120)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertEqual(REPORT.findall(r.stderr), [])

    def client_server(self, tool, server_args, client_args):
        port = free_tcp_port()
        server = subprocess.Popen(self.sanitized(tool, *server_args, "-p", str(port)), stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True)
        try:
            wait_listening(port, server)
            client = subprocess.run(self.sanitized(tool, *client_args, "-p", str(port), "127.0.0.1"),
                                    capture_output=True, text=True, timeout=120)
            out, err = server.communicate(timeout=120)
        finally:
            if server.poll() is None:
                server.kill()
                server.wait()
        print(client.stdout + client.stderr + out + err, file=sys.stderr)
        self.assertEqual((client.returncode, server.returncode), (0, 0))
        return REPORT.findall(client.stderr) + REPORT.findall(err)

    def test_pingpong_and_perftest_are_not_reported(self):
        gid = str(self.daemon.gid_index())
        pingpong = ["-d", NAME, "-g", gid, "-n", "50", "-c"]
        cases = [("ibv_rc_pingpong", pingpong, pingpong)]
        for tool in ("ib_send_bw", "ib_write_bw", "ib_read_bw", "ib_atomic_bw"):
            args = ["-d", NAME, "-x", gid, "-n", "200", "-F"]
            cases.append((tool, args, args))
        for tool, server_args, client_args in cases:
            with self.subTest(tool=tool):
                if missing_tools([tool]):
                    self.skipTest(f"{tool} not installed")
                self.assertEqual(self.client_server(tool, server_args, client_args), [])


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
