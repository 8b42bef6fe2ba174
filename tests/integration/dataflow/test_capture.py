#!/usr/bin/env python3
"""`uroce capture` (issue 15; docs/capture.md) and what tcpdump sees on the
interface of a net_af_packet port (issue 14 item 6).

usage: test_capture.py UROCED UROCE

On the veth topology (two uroced, one per namespace):
- a capture of ibv_rc_pingpong on the first daemon: tshark and `uroce decode`
  read the same frames (count, opcodes, PSNs, QPs), every ICRC good, both
  directions present, nothing lost;
- frames injected from a raw socket in the peer namespace, one to a QP that
  does not exist (the engine drops it) and one cut short (the parser drops
  it), appear in the capture with a comment naming the check;
- frames the fault hook drops (a rule each way) appear once, in their
  direction, with a comment naming the rule;
- --qp keeps only the frames of that QP; --count stops after that many;
- a non-root user (nobody, through setpriv) is refused with EPERM;
- a capture whose reader stops reading loses frames, says how many at exit,
  and the daemon goes on; a capture killed with SIGKILL leaves the daemon
  serving the next run;
- tcpdump on the first namespace's end of the veth sees the RoCE frames its
  uroced sends with the default devargs (qdisc_bypass=0), and none of them
  when the devargs ask for qdisc_bypass=1.
Exit 77 (skipped), with the reason, without root or the tools.
"""

import json
import os
import re
import signal
import struct
import subprocess
import sys
import tempfile
import time
import unittest
import zlib

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import uroce_harness as harness  # noqa: E402

READY_SECONDS = 30
ROCE_PORT = 4791
PROBE_PORT = 4792
UNUSED_QPN = 0xABCDE  # far above the QPNs a fresh daemon hands out


def wait_until(condition, seconds, what):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.02)
    raise AssertionError(f"{what} within {seconds} s")


class CaptureRun:
    """`uroce capture` of one daemon into a file (or a pipe)."""

    def __init__(self, daemon, path, extra=(), stdout=None, user=None):
        self.daemon = daemon
        self.path = path
        self.err = tempfile.TemporaryFile(mode="w+")
        argv = [daemon.uroce, "capture", "--state-dir", daemon.state, "--device", daemon.name, "-w", path, *extra]
        if user:
            argv = ["setpriv", f"--reuid={user}", "--regid=65534", "--clear-groups", *argv]
        self.proc = subprocess.Popen(argv, stdout=stdout if stdout is not None else subprocess.DEVNULL,
                                     stderr=self.err, stdin=subprocess.DEVNULL)

    def stderr(self):
        self.err.seek(0)
        return self.err.read()

    def wait_started(self):
        wait_until(lambda: "capturing" in self.stderr() or self.proc.poll() is not None, READY_SECONDS,
                   "uroce capture did not start")
        if self.proc.poll() is not None:
            raise AssertionError(f"uroce capture exited {self.proc.returncode}: {self.stderr()}")

    def stop(self):
        """SIGINT, then its exit code and stderr."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError(f"uroce capture did not stop on SIGINT: {self.stderr()}")
        return self.proc.returncode, self.stderr()

    def wait_exit(self, seconds=30):
        self.proc.wait(timeout=seconds)
        return self.proc.returncode, self.stderr()


def frames_written(text):
    m = re.search(r"(\d+) frames written", text)
    assert m, f"no 'frames written' line: {text}"
    return int(m.group(1))


def frames_lost(text):
    m = re.search(r"capture lost (\d+) frames", text)
    assert m, f"no 'capture lost' line: {text}"
    return int(m.group(1))


def tshark_frames(path):
    """[(opcode, psn, dest_qp, direction, comment)] of the RoCE frames tshark reads."""
    r = subprocess.run(["tshark", "-n", "-r", path, "-o", "frame.generate_md5_hash:FALSE", "-T", "fields",
                        "-E", "separator=|", "-e", "udp.dstport", "-e", "infiniband.bth.opcode",
                        "-e", "infiniband.bth.psn", "-e", "infiniband.bth.destqp",
                        "-e", "frame.packet_flags_direction", "-e", "frame.comment",
                        "-d", f"udp.port=={ROCE_PORT},infiniband"],
                       capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        # An older tshark may not know an option; try without it.
        raise AssertionError(f"tshark -r failed: {r.stderr}")
    rows = []
    for line in r.stdout.splitlines():
        port, opcode, psn, qp, direction, comment = (line.split("|") + [""] * 6)[:6]
        rows.append((int(opcode) if opcode else None, int(psn) if psn else None, int(qp, 0) if qp else None,
                     int(direction, 0) if direction else None, comment))
    return rows


def decode_frames(uroce, path):
    """(exit code, [frame objects], totals) of `uroce decode --json`."""
    r = subprocess.run([uroce, "decode", "--json", path], capture_output=True, text=True, timeout=60)
    lines = [json.loads(line) for line in r.stdout.splitlines() if line.strip()]
    return r.returncode, lines[:-1], lines[-1] if lines else {}


def mac_of(ns, ifname):
    out = harness.VethNamespaces.run(ns, ["cat", f"/sys/class/net/{ifname}/address"]).stdout.strip()
    if not re.fullmatch(r"[0-9a-f:]{17}", out):
        out = harness.VethNamespaces.run(ns, ["ip", "-o", "link", "show", ifname]).stdout
        out = re.search(r"link/ether ([0-9a-f:]{17})", out).group(1)
    return out


def roce_frame(dst_mac, src_mac, src_ip, dst_ip, dest_qp, psn=0, payload=b"capture test...."):
    """An RC SEND ONLY frame (IBA 9.2 BTH; RoCE v2 over IPv4) with its ICRC
    (IBA A17.3.3: CRC-32 over the frame from the IP header, with the
    variant fields masked to ones and 8 bytes of ones before it)."""
    bth = struct.pack("!BBHII", 0x04, 0, 0xFFFF, dest_qp & 0xFFFFFF, psn & 0xFFFFFF)
    udp_len = 8 + len(bth) + len(payload) + 4
    ip_len = 20 + udp_len
    ip = bytearray(struct.pack("!BBHHHBBH4s4s", 0x45, 0, ip_len, 0, 0x4000, 64, 17, 0,
                               bytes(map(int, src_ip.split("."))), bytes(map(int, dst_ip.split(".")))))
    s = sum(struct.unpack("!10H", bytes(ip)))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    ip[10:12] = struct.pack("!H", ~s & 0xFFFF)
    udp = struct.pack("!HHHH", 0xC000, ROCE_PORT, udp_len, 0)
    masked_ip = bytearray(ip)
    masked_ip[1] = 0xFF            # TOS
    masked_ip[8] = 0xFF            # TTL
    masked_ip[10:12] = b"\xff\xff"  # header checksum
    masked_udp = udp[:6] + b"\xff\xff"
    masked_bth = bytearray(bth)
    masked_bth[4] = 0xFF           # resv8a
    icrc = zlib.crc32(b"\xff" * 8 + bytes(masked_ip) + masked_udp + bytes(masked_bth) + payload)
    eth = bytes.fromhex(dst_mac.replace(":", "")) + bytes.fromhex(src_mac.replace(":", "")) + b"\x08\x00"
    return eth + bytes(ip) + udp + bth + payload + struct.pack("<I", icrc)


def inject(ns, ifname, frames):
    """Sends raw Ethernet frames out of `ifname` in namespace `ns`."""
    code = ("import socket, sys\n"
            f"s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)\ns.bind(({ifname!r}, 0))\n"
            "for h in sys.argv[1:]:\n    s.send(bytes.fromhex(h))\n")
    subprocess.run(["ip", "netns", "exec", ns, sys.executable, "-c", code, *[f.hex() for f in frames]],
                   check=True, capture_output=True, timeout=30)


class CaptureTests(unittest.TestCase):
    topo = None  # set by make_suite

    def setUp(self):
        self.dir = tempfile.TemporaryDirectory(prefix="uroce-capture-")
        os.chmod(self.dir.name, 0o755)

    def tearDown(self):
        self.dir.cleanup()
        self.assertEqual(self.topo.dead_daemons(), [], self.topo.daemon_logs())

    def pingpong(self, iters=20, size=64):
        topo = self.topo
        port = harness.free_tcp_port()
        common = ["-g", str(topo.server.gid_index), "-p", str(port), "-n", str(iters), "-s", str(size), "-c",
                  "-m", str(topo.server.mtu)]
        result = harness.run_pair(topo, ["ibv_rc_pingpong", "-d", topo.server.device, *common],
                                  ["ibv_rc_pingpong", "-d", topo.client.device, *common, topo.server.tcp_host],
                                  port, timeout=60)
        self.assertTrue(result.ok(), f"{result.summary()}\n{result.describe()}")
        return result

    def capture_path(self, name):
        return os.path.join(self.dir.name, name)

    def test_tshark_and_decode_see_the_same_frames(self):
        path = self.capture_path("run.pcapng")
        cap = CaptureRun(self.topo.server.daemon, path)
        cap.wait_started()
        self.pingpong(iters=20)
        # Everything the pair exchanged is in the socket or the file once the
        # last ACK went: wait (bounded) until the count stops growing.
        code, err = cap.stop()
        self.assertEqual(code, 0, err)
        written = frames_written(err)
        self.assertEqual(frames_lost(err), 0, err)
        # 20 round trips of one SEND each way, and their ACKs: at least 40 frames each way.
        self.assertGreaterEqual(written, 80, err)
        rc, frames, totals = decode_frames(self.topo.server.daemon.uroce, path)
        self.assertEqual(rc, 0, totals)
        self.assertEqual(totals["frames"], written, totals)
        self.assertEqual(totals["roce"], written, totals)
        self.assertEqual(totals["icrc_ok"], written, totals)
        shark = tshark_frames(path)
        self.assertEqual(len(shark), written)
        self.assertEqual([(f["opcode"], f["psn"], f["dest_qp"]) for f in frames],
                         [(opcode, psn, qp) for opcode, psn, qp, _d, _c in shark])
        directions = {d for _o, _p, _q, d, _c in shark}
        self.assertEqual(directions, {1, 2}, "both received (1) and sent (2) frames")
        self.assertEqual({c for *_rest, c in shark}, {""}, "no frame of a clean run is marked dropped")

    def test_receive_check_drops_are_marked(self):
        topo = self.topo
        net = topo.net
        path = self.capture_path("drops.pcapng")
        cap = CaptureRun(topo.server.daemon, path)
        cap.wait_started()
        dst_mac, src_mac = mac_of(net.ns[0], net.ifname[0]), mac_of(net.ns[1], net.ifname[1])
        good = roce_frame(dst_mac, src_mac, net.ip[1], net.ip[0], UNUSED_QPN)
        cut_short = roce_frame(dst_mac, src_mac, net.ip[1], net.ip[0], UNUSED_QPN + 1)
        # The IP and UDP lengths still say the whole frame: the parser refuses it.
        cut_short = cut_short[:14 + 20 + 8 + 6]
        before = topo.server.daemon.stats()
        inject(net.ns[1], net.ifname[1], [good, cut_short])
        wait_until(lambda: topo.server.daemon.stats()["frames"]["rx_malformed"] > before["frames"]["rx_malformed"],
                   10, "the daemon did not count the cut-short frame")
        code, err = cap.stop()
        self.assertEqual(code, 0, err)
        marked = [(qp, comment) for _o, _p, qp, _d, comment in tshark_frames(path) if comment]
        self.assertIn((UNUSED_QPN, "dropped by the engine: unknown_qp"), marked, marked)
        self.assertTrue(any(qp is None and c.startswith("dropped by the parser: ") for qp, c in marked), marked)
        self.assertEqual(len(marked), 2, marked)
        rc, frames, totals = decode_frames(topo.server.daemon.uroce, path)
        # uroce decode reads the same two frames: one well formed (its ICRC good), one it drops too.
        self.assertEqual(totals["frames"], 2, totals)
        self.assertEqual(totals["icrc_ok"], 1, totals)

    def test_injected_drops_are_marked(self):
        """Frames the fault hook drops (docs/fault-injection.md) are in the
        capture once, marked with the rule, in the direction they were going."""
        daemon = self.topo.server.daemon
        path = self.capture_path("faults.pcapng")
        rules = ["drop:nth=3,dir=tx,class=request", "drop:nth=4,dir=rx,class=request"]
        for rule in rules:
            self.fault_cli(daemon, "add", rule)
        self.addCleanup(self.fault_cli, daemon, "clear")
        cap = CaptureRun(daemon, path)
        cap.wait_started()
        self.pingpong(iters=10)  # RC recovers both losses
        code, err = cap.stop()
        self.assertEqual(code, 0, err)
        shark = tshark_frames(path)
        marked = [(direction, comment) for _o, _p, _q, direction, comment in shark if comment]
        # The comment names the rule as `uroce fault list` writes it.
        self.assertEqual(len(marked), 2, marked)
        by_direction = dict(marked)
        self.assertEqual(set(by_direction), {1, 2}, marked)
        self.assertTrue(by_direction[2].startswith("dropped by fault injection: drop:nth=3"), marked)
        self.assertTrue(by_direction[1].startswith("dropped by fault injection: drop:nth=4"), marked)
        rc, frames, totals = decode_frames(daemon.uroce, path)
        self.assertEqual(totals["frames"], len(shark), totals)
        self.assertEqual(totals["icrc_ok"], len(shark), totals)

    def fault_cli(self, daemon, *args):
        r = subprocess.run([daemon.uroce, "fault", *args, "--state-dir", daemon.state, "--device", daemon.name],
                           capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_qp_filter(self):
        topo = self.topo
        net = topo.net
        path = self.capture_path("qp.pcapng")
        cap = CaptureRun(topo.server.daemon, path, ["--qp", str(UNUSED_QPN)])
        cap.wait_started()
        dst_mac, src_mac = mac_of(net.ns[0], net.ifname[0]), mac_of(net.ns[1], net.ifname[1])
        frames = [roce_frame(dst_mac, src_mac, net.ip[1], net.ip[0], qp, psn=i)
                  for i, qp in enumerate([UNUSED_QPN, UNUSED_QPN + 1, UNUSED_QPN, UNUSED_QPN + 2])]
        self.pingpong(iters=5)  # traffic of other QPs, which the filter leaves out
        inject(net.ns[1], net.ifname[1], frames)
        wait_until(lambda: os.path.getsize(path) > 0 and len(tshark_frames(path)) >= 2, 10,
                   "the frames of the QP did not reach the capture")
        code, err = cap.stop()
        self.assertEqual(code, 0, err)
        shark = tshark_frames(path)
        self.assertEqual([(qp, psn) for _o, psn, qp, _d, _c in shark], [(UNUSED_QPN, 0), (UNUSED_QPN, 2)])

    def test_count_stops_the_capture(self):
        path = self.capture_path("count.pcapng")
        cap = CaptureRun(self.topo.server.daemon, path, ["--count", "7"])
        cap.wait_started()
        self.pingpong(iters=20)
        code, err = cap.wait_exit()
        self.assertEqual(code, 0, err)
        self.assertEqual(frames_written(err), 7, err)
        self.assertEqual(len(tshark_frames(path)), 7)

    def test_non_root_user_gets_eperm(self):
        daemon = self.topo.server.daemon
        os.chmod(daemon.state, 0o755)  # nobody may reach the control socket (0666), as any device user
        cap = CaptureRun(daemon, self.capture_path("nobody.pcapng"), user="nobody")
        code, err = cap.wait_exit()
        self.assertEqual(code, 1, err)
        self.assertIn("permission denied (EPERM)", err)
        self.assertFalse(os.path.exists(self.capture_path("nobody.pcapng")), "no file for a refused capture")

    def test_slow_reader_loses_frames_and_the_daemon_goes_on(self):
        # A reader that never reads: the pipe fills, then the daemon's socket;
        # the daemon drops what does not fit and counts it.
        read_end, write_end = os.pipe()
        try:
            cap = CaptureRun(self.topo.server.daemon, "-", stdout=write_end)
            os.close(write_end)
            cap.wait_started()
            self.pingpong(iters=10000)
            code, err = cap.stop()
        finally:
            os.close(read_end)
        self.assertGreater(frames_lost(err), 0, err)
        self.pingpong(iters=5)  # the daemon serves on

    def test_killed_capture_leaves_the_daemon_serving(self):
        cap = CaptureRun(self.topo.server.daemon, self.capture_path("killed.pcapng"))
        cap.wait_started()
        cap.proc.kill()
        cap.proc.wait()
        self.pingpong(iters=50)
        log = self.topo.server.daemon.log_text()
        self.assertRegex(log, r"capture session \d+(: reader gone| ended with its connection)")
        again = CaptureRun(self.topo.server.daemon, self.capture_path("again.pcapng"))
        again.wait_started()
        self.pingpong(iters=5)
        code, err = again.stop()
        self.assertEqual(code, 0, err)
        self.assertGreater(frames_written(err), 0, err)


class OtherVethNamespaces(harness.VethNamespaces):
    """A second pair of namespaces beside the suite's topology."""

    PREFIX = "urcapt"


class PairOfDaemons:
    """What harness.run_pair needs of a topology, for daemons made here."""

    def __init__(self, server, client, daemons):
        self.server, self.client, self.daemons = server, client, daemons

    def dead_daemons(self):
        return [d.name for d in self.daemons if not d.alive()]

    def daemon_logs(self):
        return "\n".join(f"--- uroced {d.name} log\n{harness.tail(d.log_text(), 30)}" for d in self.daemons)


class Tcpdump:
    """tcpdump in `ns` on `iface`, printing the RoCE v2 frames it sends and
    the probes (UDP to PROBE_PORT) that show it is capturing."""

    def __init__(self, ns, iface):
        self.out = tempfile.TemporaryFile(mode="w+")
        self.proc = subprocess.Popen(["ip", "netns", "exec", ns, "tcpdump", "-l", "-n", "-i", iface, "-Q", "out",
                                      f"udp dst port {ROCE_PORT} or udp dst port {PROBE_PORT}"],
                                     stdout=self.out, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)

    def lines(self, port):
        self.out.seek(0)
        return [line for line in self.out.read().splitlines() if re.search(rf"\.{port}: UDP", line)]

    def wait_capturing(self, ns, to_ip, more_than=0):
        """Sends probes until tcpdump has printed more than `more_than` of
        them (one probe can be lost, e.g. while the neighbour entry is
        being resolved again, so each poll sends another)."""
        send = ("import socket; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); "
                f"s.sendto(b'probe', ('{to_ip}', {PROBE_PORT}))")

        def probed():
            subprocess.run(["ip", "netns", "exec", ns, sys.executable, "-c", send], capture_output=True, timeout=30)
            return len(self.lines(PROBE_PORT)) > more_than or self.proc.poll() is not None

        wait_until(probed, READY_SECONDS, f"tcpdump did not capture a probe after the first {more_than}")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=30)


class TcpdumpTests(unittest.TestCase):
    """tcpdump on the sending daemon's interface, with each qdisc_bypass."""

    uroced = uroce = None  # set by main

    def frames_tcpdump_sees(self, devargs):
        net = OtherVethNamespaces(subnet="10.78.0")
        daemons = []
        try:
            for ns, ifname, ip, name in zip(net.ns, net.ifname, net.ip, ["uroce_ta", "uroce_tb"]):
                daemons.append(harness.Daemon(self.uroced, self.uroce, name=name, ip=ip,
                                              port=f"net_af_packet0,iface={ifname}{devargs}", netns=ns))
            dump = Tcpdump(net.ns[0], net.ifname[0])
            try:
                dump.wait_capturing(net.ns[0], net.ip[1])
                port = harness.free_tcp_port()
                server = harness.Endpoint(daemons[0], net.ip[0])
                common = ["-g", str(server.gid_index), "-p", str(port), "-n", "20", "-s", "64", "-c"]
                topo = PairOfDaemons(server, harness.Endpoint(daemons[1], net.ip[0]), daemons)
                result = harness.run_pair(topo, ["ibv_rc_pingpong", "-d", "uroce_ta", *common],
                                          ["ibv_rc_pingpong", "-d", "uroce_tb", *common, net.ip[0]], port, timeout=60)
                self.assertTrue(result.ok(), f"{result.summary()}\n{result.describe()}")
                # tcpdump prints a little after the fact; the probe sent last marks the end.
                dump.wait_capturing(net.ns[0], net.ip[1], more_than=len(dump.lines(PROBE_PORT)))
            finally:
                dump.stop()
            return len(dump.lines(ROCE_PORT))
        finally:
            for d in reversed(daemons):
                d.close()
            net.close()

    def test_tcpdump_sees_what_uroce_sends_by_default(self):
        seen = self.frames_tcpdump_sees("")
        sys.stderr.write(f"    default devargs: tcpdump saw {seen} RoCE frames sent\n")
        self.assertGreaterEqual(seen, 40)  # 20 SENDs and 20 ACKs at least

    def test_qdisc_bypass_1_hides_them(self):
        seen = self.frames_tcpdump_sees(",qdisc_bypass=1")
        sys.stderr.write(f"    qdisc_bypass=1: tcpdump saw {seen} RoCE frames sent\n")
        self.assertEqual(seen, 0)


def make_suite(topo):
    CaptureTests.topo = topo
    loader = unittest.TestLoader()
    tests = [CaptureTests(n) for n in loader.getTestCaseNames(CaptureTests)]
    tests += [TcpdumpTests(n) for n in loader.getTestCaseNames(TcpdumpTests)]
    return unittest.TestSuite(tests)


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    harness.set_binaries(sys.argv[1], sys.argv[2])
    TcpdumpTests.uroced, TcpdumpTests.uroce = sys.argv[1], sys.argv[2]
    return harness.run_tests("veth", ["ibv_rc_pingpong", "tshark", "tcpdump", "setpriv"], make_suite)


if __name__ == "__main__":
    sys.exit(main())
