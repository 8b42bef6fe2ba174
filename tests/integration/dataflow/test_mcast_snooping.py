#!/usr/bin/env python3
"""IGMP / MLD joins through a snooping Linux bridge (issue 12): four
namespaces, each with a uroced on net_af_packet over a veth whose other end
is a port of one bridge (mcast_snooping 1, mcast_querier 1, queries every
second, memberships forgotten after 3 s unless a report renews them). The
bridge queries in IGMPv3 and MLDv2 first, then in IGMPv2 and MLDv1.

- IPv4: mckey receivers in namespaces a and b join 239.1.5.5; the bridge's
  group table (`bridge mdb show`) lists their ports and not d's; it still
  does after more than the membership interval (the daemons answer the
  bridge's general queries); a sender in c sends 20 messages that both
  receivers get, while the daemon in d (no member) receives no RoCE frame
  at all: the bridge forwards the group only to its members. Once the
  receivers leave, the group leaves the table. The daemons report in IGMPv3.
- IPv6: mcast_check --hold attaches a UD QP in a to ff0e::1:5; its port
  appears under that group (an MLDv2 report) and goes when it detaches.
- Older querier (host compatibility mode, RFC 3376 7.2.1, RFC 3810 8.2.1):
  the bridge switched to mcast_igmp_version 2 and mcast_mld_version 1, the
  daemons go over to IGMPv2 and MLDv1 (`uroce stats` group membership);
  receivers in a and b of 239.1.5.6 and a holder of ff0e::1:6 are listed,
  still after more than the membership interval (v2 reports answering
  v2 queries), and leave the table when they go (a v2 leave, an MLDv1 done).

usage: test_mcast_snooping.py UROCED UROCE MCAST_CHECK
Exit 77 (skipped) when not root, or mckey or bridge is missing.
"""

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import uroce_harness as harness  # noqa: E402

GROUP4 = "239.1.5.5"
GROUP6 = "ff0e::1:5"
GROUP4_V2 = "239.1.5.6"  # the older querier's case has groups of its own
GROUP6_V1 = "ff0e::1:6"
MESSAGES = 20
SUBNET = "10.79.0"
HOSTS = "abcd"
# Bridge timers, in centiseconds (ip-link(8)): a query every second, answers
# within half a second, and a membership not renewed for 3 s is dropped.
BRIDGE_TIMERS = ["mcast_query_interval", "100", "mcast_query_response_interval", "50",
                 "mcast_membership_interval", "300", "mcast_startup_query_interval", "100"]
SETTLE_SECONDS = 15   # bound for a table change to show
RUN_SECONDS = 60


def sh(*argv):
    return subprocess.run(argv, check=True, capture_output=True, text=True, timeout=30).stdout


class SnoopingBridge:
    """A bridge namespace and one host namespace per name in HOSTS, each host's
    veth a port of the bridge."""

    PREFIX = "urmc"

    def __init__(self):
        pid = os.getpid()
        self.br_ns = f"{self.PREFIX}{pid}br"
        self.ns = {h: f"{self.PREFIX}{pid}{h}" for h in HOSTS}
        self.ifname = {h: f"urmc{h}" for h in HOSTS}      # in the host namespace
        self.port = {h: f"urmcp{h}" for h in HOSTS}       # its peer, a bridge port
        self.ip = {h: f"{SUBNET}.{i + 1}" for i, h in enumerate(HOSTS)}
        self.created = []
        harness._track(self)  # a SIGTERM removes the namespaces too
        try:
            sh("ip", "netns", "add", self.br_ns)
            self.created.append(self.br_ns)
            sh("ip", "-n", self.br_ns, "link", "add", "urmcbr", "type", "bridge", "mcast_snooping", "1",
               "mcast_querier", "1", "mcast_igmp_version", "3", "mcast_mld_version", "2", *BRIDGE_TIMERS)
            for h in HOSTS:
                sh("ip", "netns", "add", self.ns[h])
                self.created.append(self.ns[h])
                sh("ip", "-n", self.br_ns, "link", "add", self.port[h], "type", "veth", "peer", "name",
                   self.ifname[h], "netns", self.ns[h])
                sh("ip", "-n", self.br_ns, "link", "set", self.port[h], "master", "urmcbr", "up")
                subprocess.run(["ip", "netns", "exec", self.ns[h], "sh", "-c",
                                f"echo 1 > /proc/sys/net/ipv6/conf/{self.ifname[h]}/disable_ipv6"],
                               capture_output=True, timeout=30)
                sh("ip", "-n", self.ns[h], "link", "set", self.ifname[h], "up")
                sh("ip", "-n", self.ns[h], "addr", "add", f"{self.ip[h]}/24", "dev", self.ifname[h])
                sh("ip", "-n", self.ns[h], "link", "set", "lo", "up")
            sh("ip", "-n", self.br_ns, "link", "set", "urmcbr", "up")
        except BaseException:
            self.close()
            raise

    def ports_in(self, group):
        """The bridge ports `bridge mdb show` lists under `group`."""
        out = sh("ip", "netns", "exec", self.br_ns, "bridge", "mdb", "show", "dev", "urmcbr")
        return {m.group(1) for m in re.finditer(rf"port (\S+) grp {re.escape(group)}\b", out)}

    def query_in(self, igmp_version, mld_version):
        """The bridge's querier speaks these versions from its next query on."""
        sh("ip", "-n", self.br_ns, "link", "set", "urmcbr", "type", "bridge", "mcast_igmp_version",
           str(igmp_version), "mcast_mld_version", str(mld_version))

    def mdb(self):
        return sh("ip", "netns", "exec", self.br_ns, "bridge", "mdb", "show", "dev", "urmcbr")

    def close(self):
        harness._untrack(self)
        for ns in reversed(self.created):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=30)
        self.created = []

    @classmethod
    def remove_stale(cls):
        r = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, timeout=30)
        for line in r.stdout.splitlines():
            m = re.match(rf"({cls.PREFIX}(\d+)(br|[{HOSTS}]))\b", line)
            if m and not os.path.exists(f"/proc/{m.group(2)}"):
                subprocess.run(["ip", "netns", "del", m.group(1)], capture_output=True, timeout=30)


class Program:
    """A client program of a daemon with its output in a file."""

    def __init__(self, daemon, *argv, stdin=None):
        self.log = tempfile.TemporaryFile(mode="w+")
        self.proc = subprocess.Popen(daemon.exec_argv(*argv), stdin=stdin, stdout=self.log,
                                     stderr=subprocess.STDOUT, text=True)

    def output(self):
        self.log.seek(0)
        return self.log.read()

    def wait_for(self, sign, seconds=30):
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline and self.proc.poll() is None:
            if sign in self.output():
                return True
            time.sleep(0.02)
        return sign in self.output()

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


class Snooping(unittest.TestCase):
    net = None
    daemons = None
    mcast_check = None

    def until(self, what, predicate, seconds=SETTLE_SECONDS):
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if predicate():
                return
            time.sleep(0.1)
        self.fail(f"{what} within {seconds} s; bridge table:\n{self.net.mdb()}\n"
                  + "\n".join(d.log_text()[-2000:] for d in self.daemons.values()))

    def program(self, host, *argv, **kw):
        p = Program(self.daemons[host], *argv, **kw)
        self.addCleanup(p.close)
        return p

    def test_ipv4_group_reaches_only_its_members(self):
        net = self.net
        receivers = [self.program(h, "mckey", "-m", GROUP4, "-b", net.ip[h], "-C", str(MESSAGES)) for h in "ab"]
        for r in receivers:
            self.assertTrue(r.wait_for("receiving data transfers"), f"mckey never joined:\n{r.output()}")
        members = {net.port["a"], net.port["b"]}
        self.until(f"ports of a and b under {GROUP4}", lambda: members <= net.ports_in(GROUP4))
        self.assertNotIn(net.port["d"], net.ports_in(GROUP4))
        # The joins' two reports are 1 s apart, so without answers to the
        # bridge's queries the ports would leave the table 1 + 3 s after the
        # join; 5.5 s later only answered queries keep them listed.
        time.sleep(5.5)
        self.assertTrue(members <= net.ports_in(GROUP4), f"memberships not renewed:\n{net.mdb()}")

        bystander_before = self.daemons["d"].stats()["frames"]["rx_roce"]
        sender = subprocess.run(self.daemons["c"].exec_argv("mckey", "-m", GROUP4, "-s", "-b", net.ip["c"],
                                                            "-C", str(MESSAGES)),
                                capture_output=True, text=True, timeout=RUN_SECONDS)
        self.assertEqual(sender.returncode, 0, sender.stdout + sender.stderr)
        for r in receivers:
            rc, out = r.finish()
            self.assertEqual(rc, 0, out)
            self.assertIn("data transfers complete", out)
        self.assertEqual(self.daemons["d"].stats()["frames"]["rx_roce"], bystander_before,
                         "the bridge forwarded the group to a port with no member")
        self.until(f"{GROUP4} gone from the table after the last leave", lambda: not net.ports_in(GROUP4) & members)
        self.assertEqual(self.membership("a")["igmp_version"], 3, "an IGMPv3 querier heard, v3 reports")

    def membership(self, host):
        return self.daemons[host].stats()["membership"]

    def test_v2_querier_keeps_receivers_listed(self):
        """Runs last (names sort): the daemons stay in IGMPv2 / MLDv1 mode for
        the Older Version Querier Present Timeout (260 s) after the last older
        query."""
        net = self.net
        net.query_in(2, 1)
        self.addCleanup(net.query_in, 3, 2)
        self.until("daemons a and b in IGMPv2 and MLDv1 mode",
                   lambda: all((self.membership(h)["igmp_version"], self.membership(h)["mld_version"]) == (2, 1)
                               for h in "ab"))
        receivers = [self.program(h, "mckey", "-m", GROUP4_V2, "-b", net.ip[h], "-C", str(MESSAGES)) for h in "ab"]
        for r in receivers:
            self.assertTrue(r.wait_for("receiving data transfers"), f"mckey never joined:\n{r.output()}")
        holder = self.program("a", self.mcast_check, "--hold", GROUP6_V1, stdin=subprocess.PIPE)
        self.assertTrue(holder.wait_for("attached"), holder.output())
        members = {net.port["a"], net.port["b"]}
        self.until(f"ports of a and b under {GROUP4_V2}", lambda: members <= net.ports_in(GROUP4_V2))
        self.until(f"port of a under {GROUP6_V1}", lambda: net.port["a"] in net.ports_in(GROUP6_V1))
        reports_before = self.membership("a")["reports_sent"]
        # The v2 joins are repeated after 10 s; memberships last 3 s: 5.5 s
        # later only the answers to the bridge's v2 queries keep them listed.
        time.sleep(5.5)
        self.assertTrue(members <= net.ports_in(GROUP4_V2), f"memberships not renewed:\n{net.mdb()}")
        self.assertIn(net.port["a"], net.ports_in(GROUP6_V1), f"MLDv1 membership not renewed:\n{net.mdb()}")
        after = self.membership("a")
        self.assertGreater(after["reports_sent"], reports_before)
        self.assertEqual((after["igmp_version"], after["mld_version"]), (2, 1))
        self.assertGreater(after["older_queries"], 0)
        self.assertGreater(after["queries_answered"], 0)

        holder.proc.stdin.write("go\n")
        holder.proc.stdin.flush()
        self.assertTrue(holder.wait_for("detached"), holder.output())
        self.until(f"{GROUP6_V1} gone after the MLDv1 done", lambda: net.port["a"] not in net.ports_in(GROUP6_V1))
        leaves_before = self.membership("b")["leaves_sent"]
        receivers[1].close()  # its QP goes with it: the daemon leaves the group
        self.until(f"port of b gone from {GROUP4_V2} after the v2 leave",
                   lambda: net.port["b"] not in net.ports_in(GROUP4_V2))
        self.assertEqual(self.membership("b")["leaves_sent"], leaves_before + 1, "one v2 leave, not repeated")

    def test_ipv6_group_joined_and_left(self):
        holder = self.program("a", self.mcast_check, "--hold", GROUP6, stdin=subprocess.PIPE)
        self.assertTrue(holder.wait_for("attached"), holder.output())
        self.until(f"port of a under {GROUP6}", lambda: self.net.port["a"] in self.net.ports_in(GROUP6))
        holder.proc.stdin.write("go\n")
        holder.proc.stdin.flush()
        self.assertTrue(holder.wait_for("detached"), holder.output())
        self.until(f"{GROUP6} gone from the table", lambda: self.net.port["a"] not in self.net.ports_in(GROUP6))

    def test_daemons_alive(self):
        self.assertEqual([h for h, d in self.daemons.items() if not d.alive()], [])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("uroced")
    ap.add_argument("uroce")
    ap.add_argument("mcast_check")
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("SKIP: needs root (namespaces, a bridge)")
        return harness.SKIP
    missing = [t for t in ("mckey", "bridge") if shutil.which(t) is None]
    if missing:
        print(f"SKIP: missing {', '.join(missing)}")
        return harness.SKIP
    reason = harness.skip_reason("veth", ["mckey"])
    if reason:
        print(f"SKIP: {reason}")
        return harness.SKIP
    SnoopingBridge.remove_stale()
    net = SnoopingBridge()
    daemons = {}
    try:
        for h in HOSTS:
            daemons[h] = harness.Daemon(os.path.abspath(args.uroced), os.path.abspath(args.uroce), name=f"uroce_{h}",
                                        ip=net.ip[h], port=f"net_af_packet0,iface={net.ifname[h]}",
                                        netns=net.ns[h])
        Snooping.net = net
        Snooping.daemons = daemons
        Snooping.mcast_check = os.path.abspath(args.mcast_check)
        suite = unittest.defaultTestLoader.loadTestsFromTestCase(Snooping)
        result = unittest.TextTestRunner(verbosity=2, stream=sys.stderr).run(suite)
        return 0 if result.wasSuccessful() else 1
    finally:
        for d in daemons.values():
            d.close()
        net.close()


if __name__ == "__main__":
    sys.exit(main())
