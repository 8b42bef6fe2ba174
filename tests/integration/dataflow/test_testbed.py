#!/usr/bin/env python3
"""`uroce testbed up / exec / status / down` (docs/ci-testbed.md), driving
two-node runs of the data tests.

usage: test_testbed.py UROCED UROCE BYTE_CHECK

- A two-node testbed (a veth pair): each node sees its own device through
  `uroce testbed exec`; ibv_rc_pingpong -c at 4 KiB over RoCE v2 on IPv4
  and on IPv6, and byte_check (every byte of WRITE, READ, SEND, and the
  remote access errors) between n1 and n2; then `down` leaves no
  namespace, state directory or record.
- Three nodes (a bridge in its own namespace), MTU 9000: a ping-pong with
  a 4096-byte path MTU between n3 and n1.
- After a crash: one node's uroced is SIGKILLed and its PID handed (in the
  record) to an unrelated process, as if the kernel had reused it; `down`
  removes everything, stops the other daemon, leaves that process alone,
  and removes the dead daemon's DPDK runtime directory.
- A failed `up` (a "daemon" that exits at once) removes what it made.
- --loss: 5% loss each way by uroced --fault; skipped (reported) when this
  uroced has no --fault option.

Exit 77 (skipped), with the reason, without root or the tools.
"""

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import uroce_harness as harness  # noqa: E402
from test_byte_check import EXPECTED_CASES  # noqa: E402

UROCED = UROCE = BYTE_CHECK = None
TOOLS = ["ibv_rc_pingpong", "ibv_devices", "stdbuf", "ip"]
ITERS = 500
SIZE = 4096


def testbed_name(tag):
    """Unique per run, so a leftover of a killed run never clashes."""
    return f"t{os.getpid()}{tag}"


def namespaces_of(name):
    r = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, timeout=30)
    return [line.split()[0] for line in r.stdout.splitlines() if line.startswith(f"uroce-{name}-")]


def pingpong(test, tb, server_node, client_node, gid_index, tcp_host, lossy=False):
    port = harness.free_tcp_port()
    base = ["ibv_rc_pingpong", "-d", "uroce0", "-g", str(gid_index), "-p", str(port), "-s", str(SIZE), "-n",
            str(ITERS), "-c", "-m", str(server_node.active_mtu())]

    class Pair:  # run_pair's view: which node runs which side
        server = harness.Endpoint(server_node, tcp_host)
        client = harness.Endpoint(client_node, tcp_host)
        dead_daemons = tb.dead_daemons
        daemon_logs = tb.daemon_logs

    result = harness.run_pair(Pair, base, base + [tcp_host], port, timeout=120)
    detail = result.describe()
    if lossy and not result.ok() and harness.pingpong_last_ack_lost(result, ITERS):
        sys.stderr.write("    the last SEND's ACK was lost after its peer exited (RETRY_EXC_ERR on that side)\n")
        return
    test.assertTrue(result.ok(), f"{result.summary()}\n{detail}")
    for side in (result.server, result.client):
        moved = re.search(r"(?m)^(\d+) bytes in [\d.]+ seconds", side.output)
        test.assertTrue(moved, f"{side.role}: no throughput line\n{detail}")
        test.assertEqual(int(moved.group(1)), SIZE * ITERS * 2, detail)
        test.assertNotIn("invalid data", side.output, detail)
    return result


class TwoNodeTests(unittest.TestCase):
    def test_up_exec_down(self):
        name = testbed_name("a")
        tb = harness.Testbed(UROCE, name)
        try:
            self.assertIn(f"testbed {name} is up: 2 nodes joined by a veth pair", tb.up.stdout)
            self.assertIn("testbed exec --name", tb.up.stdout)  # how to run a program on each node
            self.assertEqual(sorted(namespaces_of(name)), [f"uroce-{name}-n1", f"uroce-{name}-n2"])
            self.assertEqual(tb.run("status", name).returncode, 0)
            for node in tb.nodes:
                r = subprocess.run(node.exec_argv("ibv_devices"), capture_output=True, text=True, timeout=60)
                self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
                self.assertRegex(r.stdout, r"(?m)^\s*uroce0\s+[0-9a-f]{16}\s*$")
                # the program really runs in the node's namespace
                r = subprocess.run(node.exec_argv("ip", "-o", "addr", "show", "veth0"), capture_output=True,
                                   text=True, timeout=60)
                self.assertIn(f"inet {node.ip}/24", r.stdout)
                self.assertIn(f"inet6 {node.ipv6}/64", r.stdout)
            pingpong(self, tb, tb.nodes[0], tb.nodes[1], tb.server.gid_index, tb.nodes[0].ip)
            sys.stderr.write(f"    ibv_rc_pingpong -c -s {SIZE} over IPv4 (GID {tb.server.gid_index}): ok\n")
            pingpong(self, tb, tb.nodes[0], tb.nodes[1], tb.server.gid_index + 1, tb.nodes[0].ip)
            sys.stderr.write(f"    ibv_rc_pingpong -c -s {SIZE} over IPv6 (GID {tb.server.gid_index + 1}): ok\n")
            self.byte_check(tb)
            self.assertEqual(tb.dead_daemons(), [], tb.daemon_logs())
            pids = [n.pid for n in tb.nodes]
        finally:
            down = tb.down()
            tb.close()
        self.assertEqual(down.returncode, 0, down.stdout + down.stderr)
        self.assertRegex(down.stdout, r"uroced of n1 \(pid \d+\): stopped")
        self.assertRegex(down.stdout, r"uroced of n2 \(pid \d+\): stopped")
        self.assertEqual(namespaces_of(name), [])
        for pid in pids:
            self.assertFalse(harness_alive(pid), f"uroced {pid} still running")
        self.assertFalse(os.path.exists(os.path.join(tb.tmp.name, f"testbed-{name}.json")))

    def byte_check(self, tb):
        port = harness.free_tcp_port()
        server = [BYTE_CHECK, "-d", tb.server.device, "-g", str(tb.server.gid_index), "-p", str(port)]
        client = [BYTE_CHECK, "-d", tb.client.device, "-g", str(tb.client.gid_index), "-p", str(port),
                  tb.server.tcp_host]
        result = harness.run_pair(tb, server, client, port, timeout=180)
        detail = result.describe()
        self.assertTrue(result.ok(), f"{result.summary()}\n{detail}")
        total = re.search(r"(?m)^(\d+) case\(s\), (\d+) failure\(s\)$", result.client.output)
        self.assertTrue(total, detail)
        self.assertEqual((int(total.group(1)), int(total.group(2))), (EXPECTED_CASES, 0), detail)
        sys.stderr.write(f"    byte_check: {EXPECTED_CASES} cases, 0 failures\n")


def harness_alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (FileNotFoundError, ProcessLookupError):
        return False


class BridgeTests(unittest.TestCase):
    def test_three_nodes_on_a_bridge(self):
        name = testbed_name("b")
        tb = harness.Testbed(UROCE, name, "--nodes", "3", "--mtu", "9000")
        try:
            self.assertIn("3 nodes joined by a bridge", tb.up.stdout)
            self.assertIn("MTU 9000", tb.up.stdout)
            for node in tb.nodes:  # a 9000-byte Ethernet MTU carries a 4096-byte path MTU (docs/daemon.md)
                self.assertEqual(node.active_mtu(), 4096, node.status_text)
            self.assertEqual(sorted(namespaces_of(name)),
                             [f"uroce-{name}-br", f"uroce-{name}-n1", f"uroce-{name}-n2", f"uroce-{name}-n3"])
            pingpong(self, tb, tb.nodes[0], tb.nodes[2], tb.server.gid_index, tb.nodes[0].ip)
            sys.stderr.write("    3 nodes, MTU 9000: ibv_rc_pingpong -m 4096 n3 -> n1 over the bridge: ok\n")
        finally:
            down = tb.down()
            tb.close()
        self.assertEqual(down.returncode, 0, down.stdout + down.stderr)
        self.assertEqual(namespaces_of(name), [])


class CrashTests(unittest.TestCase):
    def test_down_after_a_daemon_was_killed_and_its_pid_reused(self):
        name = testbed_name("c")
        tb = harness.Testbed(UROCE, name)
        bystander = subprocess.Popen(["sleep", "300"])
        try:
            victim, other = tb.nodes
            record_path = os.path.join(tb.tmp.name, f"testbed-{name}.json")
            victim_dpdk = dpdk_runtime_dir(victim.name, victim.state)
            os.kill(victim.pid, signal.SIGKILL)
            deadline_ok = harness_wait(lambda: not harness_alive(victim.pid))
            self.assertTrue(deadline_ok, "the SIGKILLed uroced did not go")
            self.assertEqual(tb.run("status", name).returncode, 1, "status must report the dead daemon")
            # The kernel gives the dead daemon's PID to another process: the
            # record now names `sleep` (with the daemon's start time).
            with open(record_path) as f:
                record = json.load(f)
            record["nodes"][0]["pid"] = bystander.pid
            with open(record_path, "w") as f:
                json.dump(record, f)
            self.assertTrue(os.path.isdir(victim_dpdk), f"the killed daemon left no {victim_dpdk}")
        finally:
            down = tb.down()
            tb.close()
        try:
            self.assertEqual(down.returncode, 0, down.stdout + down.stderr)
            self.assertIn("left alone (its PID is another process now)", down.stdout)
            self.assertRegex(down.stdout, r"uroced of n2 \(pid \d+\): stopped")
            self.assertIsNone(bystander.poll(), "down signalled a process that is not its daemon")
            self.assertFalse(harness_alive(other.pid))
            self.assertEqual(namespaces_of(name), [])
            self.assertFalse(os.path.exists(victim.state), victim.state)
            self.assertFalse(os.path.exists(victim_dpdk), f"{victim_dpdk} left behind")
            self.assertIn(f"removed {victim_dpdk} (left by a daemon that did not stop cleanly)", down.stdout)
        finally:
            bystander.kill()
            bystander.wait()


def dpdk_runtime_dir(device, state_dir):
    """/var/run/dpdk/uroce-<device>-<FNV-1a of the state directory> (docs/daemon.md)."""
    h = 2166136261
    for c in os.path.normpath(os.path.abspath(state_dir)).encode():
        h = ((h ^ c) * 16777619) & 0xFFFFFFFF
    return f"/var/run/dpdk/uroce-{device}-{h:08x}"


def harness_wait(condition, seconds=10):
    import time
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return condition()


class FailedUpTests(unittest.TestCase):
    def test_failed_up_removes_what_it_made(self):
        name = testbed_name("f")
        env = dict(os.environ, UROCE_TESTBED_DIR=os.environ.get("TMPDIR", "/tmp") + f"/uroce-tbf-{os.getpid()}")
        try:
            r = subprocess.run([UROCE, "testbed", "up", "--name", name, "--uroced", "/bin/false", "--timeout", "10"],
                               capture_output=True, text=True, timeout=60, env=env)
            self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
            self.assertIn("uroced exited before it was ready", r.stderr)
            self.assertEqual(namespaces_of(name), [])
            self.assertFalse(os.path.exists(os.path.join(env["UROCE_TESTBED_DIR"], f"testbed-{name}.json")))
            self.assertFalse(os.path.exists(os.path.join(env["UROCE_TESTBED_DIR"], f"testbed-{name}")))
        finally:
            subprocess.run([UROCE, "testbed", "down", name], capture_output=True, timeout=60, env=env)
            subprocess.run(["rm", "-rf", env["UROCE_TESTBED_DIR"]], timeout=30)


class LossTests(unittest.TestCase):
    def test_pingpong_under_loss(self):
        help_text = subprocess.run([UROCED, "--help"], capture_output=True, text=True, timeout=30).stdout
        if "--fault" not in help_text:
            self.skipTest("this uroced has no --fault (fault injection not built in): --loss not tested")
        name = testbed_name("l")
        tb = harness.Testbed(UROCE, name, "--loss", "5%")
        try:
            self.assertIn("5% loss each way (uroced --fault drop:rate=5%,dir=tx)", tb.up.stdout)
            for node in tb.record["nodes"]:
                self.assertIn("drop:rate=5%,dir=tx", node["argv"])
            pingpong(self, tb, tb.nodes[0], tb.nodes[1], tb.server.gid_index, tb.nodes[0].ip, lossy=True)
        finally:
            down = tb.down()
            tb.close()
        self.assertEqual(down.returncode, 0, down.stdout + down.stderr)


def main():
    global UROCED, UROCE, BYTE_CHECK
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("uroced")
    ap.add_argument("uroce")
    ap.add_argument("byte_check")
    args = ap.parse_args()
    UROCED, UROCE, BYTE_CHECK = (os.path.abspath(p) for p in (args.uroced, args.uroce, args.byte_check))
    if os.geteuid() != 0:
        print("SKIP: needs root to create network namespaces")
        return harness.SKIP
    missing = harness.missing_tools(TOOLS)
    if missing:
        print(f"SKIP: not installed: {', '.join(missing)} (tools/setup.sh installs them)")
        return harness.SKIP
    suite = unittest.TestSuite()
    for case in (TwoNodeTests, BridgeTests, CrashTests, FailedUpTests, LossTests):
        suite.addTests(unittest.TestLoader().loadTestsFromTestCase(case))
    result = unittest.TextTestRunner(verbosity=2, stream=sys.stderr).run(suite)
    for test, reason in result.skipped:
        print(f"skipped: {test.id()}: {reason}")
    return 0 if result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main())
