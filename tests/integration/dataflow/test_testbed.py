#!/usr/bin/env python3
"""`uroce testbed up / exec / status / down` (docs/ci-testbed.md), driving
two-node runs of the data tests.

usage: test_testbed.py UROCED UROCE BYTE_CHECK

- A two-node testbed on the default wire, memif (the devices' RoCE frames
  in shared memory, the veth for the programs' TCP only), both devices in
  the default one uroced: each node sees its own device (and only it)
  through `uroce testbed exec`; ibv_rc_pingpong -c at 4 KiB
  over RoCE v2 on IPv4 and on IPv6 (the daemons resolve each other by ARP
  and ND over the memif), byte_check (every byte of WRITE, READ, SEND, and
  the remote access errors) and rping -V (rdma_cm: the daemons' addresses
  are the nodes') between n1 and n2, with the veths' counters showing the
  RoCE frames did not cross them; then `down` leaves no namespace, state
  directory, memif socket or record. The same with --daemon-per-node (a
  uroced per node): the IPv4 ping-pong and byte_check.
- The same pair with --wire veth (af_packet, the real kernel interface
  case), in one uroced (n2's port opened in n2's namespace) and per node:
  a ping-pong whose frames the veth's counters show.
- Three nodes (a bridge in its own namespace; the default wire is then
  veth), MTU 9000: a ping-pong with a 4096-byte path MTU between n3 and n1;
  --wire memif with 3 nodes is refused with the reason.
- After a crash: one node's uroced (the memif server) is SIGKILLed and its
  PID handed (in the record) to an unrelated process, as if the kernel had
  reused it; `down` removes everything, the memif socket the dead server
  left included, stops the other daemon, leaves that process alone, and
  removes the dead daemon's DPDK runtime directory. The same with the one
  shared uroced killed.
- A failed `up` (a "daemon" that exits at once) removes what it made.
- --loss: 5% loss each way on memif by uroced --fault (one rule in the
  shared daemon, each device's own hook): the ping-pong's data is checked
  and both devices' fault counters show the drops; skipped
  (reported) when this uroced has no --fault option.

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
from rdma_cm_pair import CmPair  # noqa: E402

UROCED = UROCE = BYTE_CHECK = None
TOOLS = ["ibv_rc_pingpong", "ibv_devices", "rping", "stdbuf", "ip"]
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
    base = ["ibv_rc_pingpong", "-g", str(gid_index), "-p", str(port), "-s", str(SIZE), "-n", str(ITERS), "-c", "-m",
            str(server_node.active_mtu())]

    class Pair:  # run_pair's view: which node runs which side
        server = harness.Endpoint(server_node, tcp_host)
        client = harness.Endpoint(client_node, tcp_host)
        dead_daemons = tb.dead_daemons
        daemon_logs = tb.daemon_logs

    # Each node's own device: uroce0 on every node with a daemon per node,
    # uroce0, uroce1, ... by node in a shared daemon.
    server = base + ["-d", server_node.name]
    client = base + ["-d", client_node.name, tcp_host]
    result = harness.run_pair(Pair, server, client, port, timeout=120)
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


def veth_rx_packets(node):
    """Frames the node's kernel interface veth0 has received."""
    r = subprocess.run(["ip", "-n", node.netns, "-s", "-j", "link", "show", "veth0"], capture_output=True, text=True,
                       timeout=30)
    return json.loads(r.stdout)[0]["stats64"]["rx"]["packets"]


def injected_drops(node):
    """Frames the node's daemon dropped by its fault rules (`uroce fault list --json`)."""
    r = subprocess.run([UROCE, "fault", "list", "--json", "--state-dir", node.state, "--device", node.name],
                       capture_output=True, text=True, timeout=30)
    if r.returncode != 0:
        raise AssertionError(f"uroce fault list: {r.stdout}{r.stderr}")
    return sum(rule["injected"] for rule in json.loads(r.stdout)["rules"] if rule["rule"].startswith("drop:"))


def memif_socket(tb):
    return os.path.join(tb.tmp.name, f"testbed-{tb.name}", "memif.sock")


PER_NODE = "--daemon-per-node"


def one_shared_daemon(test, tb):
    """Every node's device in one uroced: one PID and command line for all."""
    test.assertEqual(len({(n["pid"], n["start_time"]) for n in tb.record["nodes"]}), 1, tb.record)
    test.assertEqual(len({tuple(n["argv"]) for n in tb.record["nodes"]}), 1, tb.record)
    test.assertEqual([n.name for n in tb.nodes], [f"uroce{k}" for k in range(len(tb.nodes))])
    test.assertIn("one uroced for all nodes", tb.up.stdout)


def stopped_line(tb, shared):
    """What `down` says of the daemons it stopped cleanly."""
    if shared:
        return [r"uroced of n1, n2 \(pid \d+\): stopped"]
    return [r"uroced of n1 \(pid \d+\): stopped", r"uroced of n2 \(pid \d+\): stopped"]


class TwoNodeTests(unittest.TestCase):
    def test_up_exec_down(self):
        """The default: one uroced with both memif ends, every check."""
        self.up_exec_down(shared=True)

    def test_up_exec_down_daemon_per_node(self):
        """--daemon-per-node: a uroced per node (the memif server first)."""
        self.up_exec_down(shared=False)

    def up_exec_down(self, shared):
        name = testbed_name("a" if shared else "p")
        tb = harness.Testbed(UROCE, name, *([] if shared else [PER_NODE]))
        try:
            self.assertIn(f"testbed {name} is up: 2 nodes joined by a veth pair, wire memif, MTU 9000", tb.up.stdout)
            self.assertIn("testbed exec --name", tb.up.stdout)  # how to run a program on each node
            self.assertEqual(sorted(namespaces_of(name)), [f"uroce-{name}-n1", f"uroce-{name}-n2"])
            if shared:
                one_shared_daemon(self, tb)
                argv = tb.record["nodes"][0]["argv"]
                self.assertIn(f"net_memif0,role=server,socket={memif_socket(tb)}", argv)
                device = [a for a in argv if a.startswith("name=uroce1,")]
                self.assertEqual(len(device), 1, argv)
                self.assertIn(f"port=net_memif1,role=client,socket={memif_socket(tb)},", device[0])
                self.assertIn(f"netns=uroce-{name}-n2", device[0])
                self.assertIn(tb.nodes[1].ip, device[0])  # the device's address is its node's
            else:
                self.assertIn("one uroced per node", tb.up.stdout)
                self.assertNotEqual(tb.nodes[0].pid, tb.nodes[1].pid)
                for node, role in zip(tb.record["nodes"], ("server", "client")):
                    self.assertIn(f"net_memif0,role={role},socket={memif_socket(tb)}", node["argv"])
                    self.assertIn(node["ipv4"], node["argv"])  # the daemon's address is its node's
            status = tb.run("status", name)
            self.assertEqual(status.returncode, 0, status.stdout + status.stderr)
            self.assertIn(f"memif socket {memif_socket(tb)} present", status.stdout)
            veth_before = veth_rx_packets(tb.nodes[0])
            for node in tb.nodes:
                r = subprocess.run(node.exec_argv("ibv_devices"), capture_output=True, text=True, timeout=60)
                self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
                # exactly the node's own device
                self.assertRegex(r.stdout, rf"(?m)^\s*{node.name}\s+[0-9a-f]{{16}}\s*$")
                self.assertEqual(len(re.findall(r"(?m)^\s*uroce\d", r.stdout)), 1, r.stdout)
                # the program really runs in the node's namespace
                r = subprocess.run(node.exec_argv("ip", "-o", "addr", "show", "veth0"), capture_output=True,
                                   text=True, timeout=60)
                self.assertIn(f"inet {node.ip}/24", r.stdout)
                self.assertIn(f"inet6 {node.ipv6}/64", r.stdout)
            pingpong(self, tb, tb.nodes[0], tb.nodes[1], tb.server.gid_index, tb.nodes[0].ip)
            sys.stderr.write(f"    ibv_rc_pingpong -c -s {SIZE} over IPv4 (GID {tb.server.gid_index}): ok\n")
            if shared:  # the per-node shape runs the same code per daemon: IPv4 and byte_check suffice
                pingpong(self, tb, tb.nodes[0], tb.nodes[1], tb.server.gid_index + 1, tb.nodes[0].ip)
                sys.stderr.write(f"    ibv_rc_pingpong -c -s {SIZE} over IPv6 (GID {tb.server.gid_index + 1}): ok\n")
            self.byte_check(tb)
            if shared:
                self.rping(tb)
            # The ping-pong SENDs came to n1 alone; over the veth only the
            # programs' TCP exchanges did.
            veth_frames = veth_rx_packets(tb.nodes[0]) - veth_before
            self.assertLess(veth_frames, ITERS, "RoCE frames crossed the veth on a memif testbed")
            sys.stderr.write(f"    memif: n1's veth0 received {veth_frames} frames (the programs' TCP)\n")
            self.assertEqual(tb.dead_daemons(), [], tb.daemon_logs())
            pids = [n.pid for n in tb.nodes]
        finally:
            down = tb.down()
            tb.close()
        self.assertEqual(down.returncode, 0, down.stdout + down.stderr)
        for line in stopped_line(tb, shared):
            self.assertRegex(down.stdout, line)
        self.assertEqual(namespaces_of(name), [])
        for pid in pids:
            self.assertFalse(harness_alive(pid), f"uroced {pid} still running")
        self.assertFalse(os.path.exists(os.path.join(tb.tmp.name, f"testbed-{name}.json")))
        self.assertFalse(os.path.exists(memif_socket(tb)))

    def rping(self, tb, count=50, size=4096):
        """rdma_cm: the client resolves n1's address to n1's daemon, over
        the memif (rping -V verifies every ping's data)."""
        port = harness.free_tcp_port()
        args = ["-v", "-V", "-C", str(count), "-S", str(size), "-p", str(port), "-a", tb.nodes[0].ip]
        pair = CmPair(tb.server, tb.client, ["rping", "-s", *args], ["rping", "-c", *args], port)
        self.addCleanup(pair.close)
        crc, cout, src, sout = pair.run()
        why = f"{pair.describe(cout, sout)}\n{tb.daemon_logs()}"
        self.assertEqual((crc, src), (0, 0), why)
        pings = [line for line in cout.splitlines() if line.startswith("ping data: rdma-ping-")]
        self.assertEqual(len(pings), count, why)
        sys.stderr.write(f"    rping -V -C {count} -S {size} (rdma_cm): ok\n")

    def test_veth_wire(self):
        """The real kernel interface: af_packet ports on the veth ends, in
        one uroced (n2's port opened in n2's namespace) and with a uroced
        per node."""
        for shared in (True, False):
            with self.subTest(shared=shared):
                self.veth_wire(shared)

    def veth_wire(self, shared):
        name = testbed_name("v" if shared else "w")
        tb = harness.Testbed(UROCE, name, "--wire", "veth", *([] if shared else [PER_NODE]))
        try:
            self.assertIn(f"testbed {name} is up: 2 nodes joined by a veth pair, wire veth, MTU 1500", tb.up.stdout)
            self.assertIsNone(tb.record["memif_socket"])
            if shared:
                one_shared_daemon(self, tb)
                argv = tb.record["nodes"][0]["argv"]
                self.assertIn("net_af_packet0,iface=veth0", argv)
                self.assertTrue(any(a.startswith("name=uroce1,port=net_af_packet1,iface=veth0,") and
                                    a.endswith(f",netns=uroce-{name}-n2") for a in argv), argv)
            else:
                for node in tb.record["nodes"]:
                    self.assertIn("net_af_packet0,iface=veth0", node["argv"])
            before = veth_rx_packets(tb.nodes[0])
            pingpong(self, tb, tb.nodes[0], tb.nodes[1], tb.server.gid_index, tb.nodes[0].ip)
            self.assertGreaterEqual(veth_rx_packets(tb.nodes[0]) - before, ITERS, "the RoCE frames missed the veth")
            sys.stderr.write(f"    veth ({'one uroced' if shared else 'uroced per node'}): ibv_rc_pingpong -c -s "
                             f"{SIZE} over af_packet: ok\n")
        finally:
            down = tb.down()
            tb.close()
        self.assertEqual(down.returncode, 0, down.stdout + down.stderr)
        self.assertEqual(namespaces_of(name), [])

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
            self.assertIn("wire veth", tb.up.stdout)  # memif joins two daemons only
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

    def test_memif_with_three_nodes_is_refused(self):
        name = testbed_name("m")
        env = dict(os.environ, UROCE_TESTBED_DIR=os.environ.get("TMPDIR", "/tmp") + f"/uroce-tbm-{os.getpid()}")
        try:
            r = subprocess.run([UROCE, "testbed", "up", "--name", name, "--nodes", "3", "--wire", "memif"],
                               capture_output=True, text=True, timeout=60, env=env)
            self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
            self.assertIn("--wire memif joins exactly 2 nodes", r.stderr)
            self.assertIn("use --wire veth", r.stderr)
            self.assertEqual(namespaces_of(name), [])
        finally:
            subprocess.run(["rm", "-rf", env["UROCE_TESTBED_DIR"]], timeout=30)


class CrashTests(unittest.TestCase):
    def test_down_after_a_daemon_was_killed_and_its_pid_reused(self):
        """A daemon per node: n1's (the memif server) killed, n2's stopped."""
        self.crash(shared=False)

    def test_down_after_the_shared_daemon_was_killed_and_its_pid_reused(self):
        """The one uroced of both nodes killed: nothing of it is left."""
        self.crash(shared=True)

    def crash(self, shared):
        name = testbed_name("s" if shared else "c")
        tb = harness.Testbed(UROCE, name, *([] if shared else [PER_NODE]))
        bystander = subprocess.Popen(["sleep", "300"])
        try:
            victim, other = tb.nodes
            record_path = os.path.join(tb.tmp.name, f"testbed-{name}.json")
            # a shared daemon's DPDK runtime directory is named after its first device
            victim_dpdk = dpdk_runtime_dir(victim.name, victim.state)
            os.kill(victim.pid, signal.SIGKILL)
            deadline_ok = harness_wait(lambda: not harness_alive(victim.pid))
            self.assertTrue(deadline_ok, "the SIGKILLed uroced did not go")
            self.assertEqual(tb.run("status", name).returncode, 1, "status must report the dead daemon")
            # The kernel gives the dead daemon's PID to another process: the
            # record now names `sleep` (with the daemon's start time).
            with open(record_path) as f:
                record = json.load(f)
            for node in record["nodes"][: 2 if shared else 1]:
                node["pid"] = bystander.pid
            with open(record_path, "w") as f:
                json.dump(record, f)
            self.assertTrue(os.path.isdir(victim_dpdk), f"the killed daemon left no {victim_dpdk}")
            self.assertTrue(os.path.exists(memif_socket(tb)), "the killed memif server left no socket")
        finally:
            down = tb.down()
            tb.close()
        try:
            self.assertEqual(down.returncode, 0, down.stdout + down.stderr)
            self.assertIn("left alone (its PID is another process now)", down.stdout)
            if shared:
                self.assertRegex(down.stdout, r"uroced of n1, n2 \(pid \d+\): left alone")
            else:
                self.assertRegex(down.stdout, r"uroced of n2 \(pid \d+\): stopped")
                self.assertFalse(harness_alive(other.pid))
            self.assertIsNone(bystander.poll(), "down signalled a process that is not its daemon")
            self.assertEqual(namespaces_of(name), [])
            self.assertFalse(os.path.exists(victim.state), victim.state)
            self.assertFalse(os.path.exists(victim_dpdk), f"{victim_dpdk} left behind")
            self.assertIn(f"removed {victim_dpdk} (left by a daemon that did not stop cleanly)", down.stdout)
            self.assertIn(f"removed {memif_socket(tb)}", down.stdout)
            self.assertFalse(os.path.exists(memif_socket(tb)))
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
            self.assertIn("wire memif", tb.up.stdout)
            one_shared_daemon(self, tb)  # one rule, each device's tx its own direction
            self.assertIn("5% loss each way (uroced --fault drop:rate=5%,dir=tx)", tb.up.stdout)
            for node in tb.record["nodes"]:
                self.assertIn("drop:rate=5%,dir=tx", node["argv"])
            pingpong(self, tb, tb.nodes[0], tb.nodes[1], tb.server.gid_index, tb.nodes[0].ip, lossy=True)
            # Each device dropped about 5% of the >= 500 RoCE frames it sent:
            # the drops are the daemon's own, on a wire netem cannot reach.
            for node in tb.nodes:
                dropped = injected_drops(node)
                self.assertGreater(dropped, 0, f"{node.node}: no injected drop counted")
                sys.stderr.write(f"    --loss 5% on memif: {node.node} dropped {dropped} frames, data checked\n")
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
