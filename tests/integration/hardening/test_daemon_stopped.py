#!/usr/bin/env python3
"""The daemon stopped under running programs: they exit, with an error, in
bounded time (their work requests flush; they do not spin or hang).

usage: test_daemon_stopped.py UROCED UROCE

Unmodified ibv_rc_pingpong (-n 100000000) and ib_write_bw (-D 600), server
and client through `uroce exec` on one uroced on the loopback port. Once the
daemon's engine has sent MOVING_PACKETS packets (`uroce stats --json`), the
test stops it with SIGTERM, or SIGKILL, and asks that both programs exit
within EXIT_SECONDS with a non-zero status of their own (not a signal).
Exit 77 (skipped) without root or the programs.
"""

import argparse
import json
import os
import signal
import subprocess
import sys
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
import uroce_harness as harness  # noqa: E402

TOOLS = ["ibv_rc_pingpong", "ib_write_bw"]
MOVING_PACKETS = 2000
START_SECONDS = 60
EXIT_SECONDS = 10


def program_argv(program, endpoint, port):
    if program == "ibv_rc_pingpong":
        return [program, "-d", endpoint.device, "-g", str(endpoint.gid_index), "-p", str(port), "-s", "4096",
                "-m", str(endpoint.mtu), "-n", "100000000"]
    return [program, "-d", endpoint.device, "-x", str(endpoint.gid_index), "-p", str(port), "-m", str(endpoint.mtu),
            "-F", "-D", "600"]


def tx_packets(daemon):
    r = subprocess.run([daemon.uroce, "stats", "--json", "--state-dir", daemon.state, "--device", daemon.name],
                       capture_output=True, text=True, timeout=30)
    return json.loads(r.stdout)["engine"]["tx_packets"] if r.returncode == 0 else 0


def wait_moving(daemon, programs):
    """Until the engine has sent MOVING_PACKETS (bounded); False if a program ended first."""
    deadline = time.monotonic() + START_SECONDS
    while time.monotonic() < deadline:
        if any(p.proc.poll() is not None for p in programs):
            return False
        if tx_packets(daemon) >= MOVING_PACKETS:
            return True
        time.sleep(0.05)
    return False


def wait_all_exit(programs, seconds):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and any(p.proc.poll() is None for p in programs):
        time.sleep(0.01)
    return all(p.proc.poll() is not None for p in programs)


class DaemonStoppedTests(unittest.TestCase):
    def run_case(self, program, how):
        topo = harness.Topology("loopback", *harness._binaries())
        programs = []
        try:
            port = harness.free_tcp_port()
            server = harness.start_program("server", topo.server.daemon.exec_argv(
                *program_argv(program, topo.server, port)))
            programs.append(server)
            self.assertTrue(harness.wait_listening(port, server.proc), "the server did not listen")
            programs.append(harness.start_program("client", topo.client.daemon.exec_argv(
                *program_argv(program, topo.client, port), topo.server.tcp_host)))
            moving = wait_moving(topo.server.daemon, programs)
            if not moving:
                sides = [p.finish("no data moved") for p in programs]
                self.fail("no data moved\n" + "\n".join(s.describe() for s in sides) + topo.daemon_logs())

            stopped_at = time.monotonic()
            topo.server.daemon.proc.send_signal(how)
            exited = wait_all_exit(programs, EXIT_SECONDS)
            took = time.monotonic() - stopped_at
            sides = [p.finish(f"still running {EXIT_SECONDS} s after uroced got {how.name}") for p in programs]
            detail = "\n".join(s.describe() for s in sides) + "\n" + topo.daemon_logs()
            sys.stderr.write(f"    {program}, uroced {how.name}: " + "; ".join(f"{s.role} {s.how()}" for s in sides) +
                             (f", after {took:.2f} s\n" if exited else "\n"))
            self.assertTrue(exited, f"not every program exited within {EXIT_SECONDS} s\n{detail}")
            for s in sides:
                self.assertGreater(s.returncode, 0, f"{s.role}: want an error exit of its own\n{detail}")
            if how == signal.SIGTERM:
                self.assertEqual(topo.server.daemon.proc.wait(timeout=30), 0, topo.daemon_logs())
        finally:
            for p in programs:
                p.close()
            topo.close()


def add_case(program, how):
    name = f"test_{program}_{how.name.lower()}"
    setattr(DaemonStoppedTests, name, lambda self: self.run_case(program, how))


for _program in TOOLS:
    for _how in (signal.SIGTERM, signal.SIGKILL):
        add_case(_program, _how)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("uroced")
    ap.add_argument("uroce")
    args = ap.parse_args()
    harness.set_binaries(args.uroced, args.uroce)
    reason = harness.skip_reason("loopback", TOOLS)
    if reason:
        print(f"SKIP: {reason}")
        return harness.SKIP
    suite = unittest.TestLoader().loadTestsFromTestCase(DaemonStoppedTests)
    return 0 if unittest.TextTestRunner(verbosity=2, stream=sys.stderr).run(suite).wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main())
