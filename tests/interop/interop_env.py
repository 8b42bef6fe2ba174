"""What the interop suite and the loop scripts share: the guest running the
kernel's rdma_rxe, a uroced in the guest's host namespace on its tap, a
capture of that tap, and program pairs with one side on each.

A pair meets over TCP (pingpong, perftest: the server side announces it
listens before the client starts) or through rdma_cm (the client is run
again while the server is not yet listening and the connection is refused).
"""

import enum
import os
import re
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "guest"))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
import guest as guestmod  # noqa: E402
import uroce_harness as harness  # noqa: E402

SKIP = harness.SKIP
UROCE_DEVICE = "uroce_rxe"
RXE_DEVICE = "rxe0"
RXE_GID_INDEX = 1  # rxe 6.1: index 0 is the MAC-derived fe80:: GID, 1 the IPv4-mapped RoCE v2 one
PATH_MTU = 1024    # rxe's active MTU on a 1500-byte netdev
# What a client of a refused rdma_cm connection prints (no listener yet).
REFUSED_SIGNS = ("REJECTED", "rejected", "UNREACHABLE", "unreachable")
CM_RETRY_SECONDS = 30
# How long one side may still run once the other has exited 0: its work is
# then done but for the last completions. An rxe requester whose last ACK was
# lost after its peer exited retries without end (docs/interop.md, "Retry
# count 7 is not forever"); without this bound the pair waits out its limit.
FINISHED_PEER_GRACE = 60
TOOLS = ["qemu-system-x86_64", "tcpdump", "ip", "stdbuf", "ibv_rc_pingpong", "ib_write_bw", "rping"]


class Direction(enum.Enum):
    UROCE_CLIENT = "uroce client, rxe server"
    RXE_CLIENT = "rxe client, uroce server"


class Meeting(enum.Enum):
    TCP = "tcp"          # the server listens on a TCP port for the client's exchange
    RDMA_CM = "rdma_cm"  # the client connects through rdma_cm


class Endpoint:
    def __init__(self, side, device, gid_index, ip):
        self.side, self.device, self.gid_index, self.ip = side, device, gid_index, ip


class PairOutcome:
    """How a pair ended. `server` and `client` are harness.Side (exit status,
    output, why it was killed), as in the harness's PairResult, so the
    harness's rules about program pairs (pingpong_last_ack_lost) read it."""

    def __init__(self, server, client, seconds, note=""):
        self.server, self.client = server, client
        self.seconds = seconds
        self.note = note

    def ok(self):
        return self.server.returncode == 0 and self.client.returncode == 0

    def summary(self):
        """One line: how each side ended and the first failure it printed."""
        return harness.sides_summary(self.client, self.server)

    def describe(self, lines=25):
        return (f"--- client ({self.client.how()}){self.note}\n{harness.tail(self.client.output, lines)}\n"
                f"--- server ({self.server.how()})\n{harness.tail(self.server.output, lines)}")


def skip_reason():
    if os.geteuid() != 0:
        return "needs root (network namespace, tap, /dev/infiniband)"
    missing = harness.missing_tools(TOOLS)
    if missing:
        return f"not installed: {', '.join(missing)} (tools/setup.sh installs them)"
    return None


def build_guest(cache):
    """(vmlinuz, initramfs), or raises SystemExit(77) with the reason."""
    r = subprocess.run([sys.executable, os.path.join(HERE, "guest", "build_guest.py"), cache],
                       capture_output=True, text=True, timeout=900)
    sys.stderr.write(r.stderr)
    if r.returncode == SKIP:
        print(r.stdout.strip())
        raise SystemExit(SKIP)
    if r.returncode != 0:
        raise RuntimeError(f"build_guest.py failed ({r.returncode}):\n{r.stdout}{r.stderr}")
    vmlinuz, initramfs = r.stdout.split()[:2]
    return vmlinuz, initramfs


class Env:
    """The guest, the uroced beside it and a capture of the tap between them."""

    def __init__(self, uroced, uroce, cache, capture=True, device=UROCE_DEVICE):
        self.uroce = uroce
        self.guest = None
        self.daemon = None
        self.capture = None
        self.tmp = tempfile.TemporaryDirectory(prefix="interop-")
        vmlinuz, initramfs = build_guest(cache)
        try:
            self.guest = guestmod.Guest(vmlinuz, initramfs)
            harness._track(self)
            self.daemon = harness.Daemon(uroced, uroce, name=device, ip=guestmod.HOST_IP,
                                         port=f"net_af_packet0,iface={guestmod.TAP},qdisc_bypass=0",
                                         netns=self.guest.netns)
            self.pcap = os.path.join(self.tmp.name, "tap.pcap")
            if capture:
                self.capture = subprocess.Popen(
                    self.guest.in_netns(["tcpdump", "-i", guestmod.TAP, "-U", "-n", "-w", self.pcap,
                                         "udp port 4791"]),
                    stdout=subprocess.DEVNULL, stderr=open(os.path.join(self.tmp.name, "tcpdump.err"), "w"))
                self._wait_capture()
        except BaseException:
            self.close()
            raise
        self.rxe = Endpoint("rxe", RXE_DEVICE, RXE_GID_INDEX, guestmod.GUEST_IP)
        self.uroce_end = Endpoint("uroce", device, self.daemon.gid_index(), guestmod.HOST_IP)
        self._serial = 0

    def _wait_capture(self):
        err = os.path.join(self.tmp.name, "tcpdump.err")
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with open(err) as f:
                if "listening on" in f.read():
                    return
            if self.capture.poll() is not None:
                raise RuntimeError(f"tcpdump exited: {open(err).read()}")
            time.sleep(0.05)
        raise RuntimeError("tcpdump did not start in 30 s")

    def stop_capture(self):
        if self.capture and self.capture.poll() is None:
            self.capture.terminate()
            self.capture.wait(timeout=30)

    def decode_capture(self):
        """`uroce decode --json` totals of the capture: {'frames', 'roce', 'icrc_ok', 'icrc_bad', ...}."""
        self.stop_capture()
        r = subprocess.run([self.uroce, "decode", "--json", self.pcap], capture_output=True, text=True,
                           timeout=900)
        lines = [line for line in r.stdout.splitlines() if line.strip()]
        import json
        totals = json.loads(lines[-1]) if lines else {}
        return r.returncode, totals, r.stderr

    def endpoints(self, direction):
        """(server, client) endpoints of `direction`."""
        if direction is Direction.UROCE_CLIENT:
            return self.rxe, self.uroce_end
        return self.uroce_end, self.rxe

    # --- one program pair
    def run_pair(self, direction, server_argv, client_argv, meeting, tcp_port=None, timeout=180):
        self._serial += 1
        start = time.monotonic()
        if direction is Direction.UROCE_CLIENT:
            return self._rxe_server(server_argv, client_argv, meeting, tcp_port, timeout, start)
        return self._uroce_server(server_argv, client_argv, meeting, tcp_port, timeout, start)

    def _rxe_server(self, server_argv, client_argv, meeting, tcp_port, timeout, start):
        marker = os.path.join(self.guest.jobs, f"listening-{self._serial}")
        server = self.guest.start(guest_server_script(server_argv, meeting, tcp_port, os.path.basename(marker)),
                                  label=f"server-{server_argv[0]}")
        deadline = time.monotonic() + timeout
        client, note, server_killed = _never_started("client", client_argv), "", None
        try:
            while not os.path.exists(marker) and server.returncode() is None and time.monotonic() < deadline:
                time.sleep(0.02)
            if os.path.exists(marker):
                client, note = self._host_client(client_argv, meeting, deadline)
            rest = max(1.0, deadline - time.monotonic())
            rc = server.wait(min(rest, FINISHED_PEER_GRACE) if client.returncode == 0 else 5)
            if rc is None:
                server_killed = "still running at the limit"
                note += f" [server killed: {server_killed}]"
        finally:
            server.kill()
        server_side = harness.Side("server", server_argv, server.returncode(), server.output(), server_killed)
        return PairOutcome(server_side, client, time.monotonic() - start, note)

    def _host_client(self, argv, meeting, deadline):
        attempts = 0
        while True:
            attempts += 1
            killed = None
            try:
                r = subprocess.run(self.daemon.exec_argv(*argv), capture_output=True, text=True,
                                   timeout=max(1.0, deadline - time.monotonic()))
                rc, out = r.returncode, r.stdout + r.stderr
            except subprocess.TimeoutExpired as e:
                rc, killed = None, "still running at the limit"
                out = f"killed at the time limit\n{_text(e.stdout)}{_text(e.stderr)}"
            refused = meeting is Meeting.RDMA_CM and rc not in (0, None) and any(s in out for s in REFUSED_SIGNS)
            if not refused or time.monotonic() > deadline:
                return (harness.Side("client", argv, rc, out, killed),
                        f" [{attempts} attempts]" if attempts > 1 else "")
            time.sleep(0.2)

    def _uroce_server(self, server_argv, client_argv, meeting, tcp_port, timeout, start):
        server = harness.start_program("server", self.daemon.exec_argv(*server_argv))
        client = None
        client_killed = None
        note = ""
        try:
            listening = True
            if meeting is Meeting.TCP:
                listening = harness.wait_listening(tcp_port, server.proc, seconds=30)
            if listening:
                client = self.guest.start(guest_client_script(client_argv, meeting), label=f"client-{client_argv[0]}")
                if _wait_beside(client, server.proc, timeout) is None:
                    client_killed = "still running at the limit"
            deadline = time.monotonic() + (30 if client is not None and client.returncode() == 0 else 3)
            while server.proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.02)
        finally:
            side = server.finish("still running at the limit")
            if client is not None:
                client.kill()
        if side.killed:
            note = f" [server {side.killed}]"
        client_side = (harness.Side("client", client_argv, client.returncode(), client.output(), client_killed)
                       if client else _never_started("client", client_argv))
        return PairOutcome(side, client_side, time.monotonic() - start, note)

    # --- loss inside the guest
    def set_loss(self, percent):
        """netem dropping `percent` % of RoCE v2 packets each way on the guest's
        eth0 (egress: prio band 3; ingress: redirected through ifb0); 0 removes it."""
        script = LOSS_OFF if percent == 0 else LOSS_ON.format(p=percent)
        rc, out = self.guest.run(script, seconds=60, label="loss")
        if rc != 0:
            raise RuntimeError(f"setting {percent}% loss failed ({rc}):\n{out}")

    def loss_counters(self):
        rc, out = self.guest.run("/usr/bin/tc -s qdisc show dev eth0; /usr/bin/tc -s qdisc show dev ifb0", seconds=60, label="tc")
        return [int(n) for n in re.findall(r"dropped (\d+)", out)]

    def close(self):
        harness._untrack(self)
        self.stop_capture()
        if self.daemon:
            self.daemon.close()
            self.daemon = None
        if self.guest:
            self.guest.close()
            self.guest = None
        self.tmp.cleanup()


def _wait_beside(job, peer, seconds):
    """The guest job's exit status, or None when it still runs `seconds`
    from now or FINISHED_PEER_GRACE after the host process `peer` exited 0."""
    deadline = time.monotonic() + seconds
    peer_done = None
    while time.monotonic() < deadline:
        rc = job.wait(0.2)
        if rc is not None:
            return rc
        if peer_done is None and peer.poll() == 0:
            peer_done = time.monotonic()
        if peer_done is not None and time.monotonic() - peer_done > FINISHED_PEER_GRACE:
            return None
    return job.returncode()


def _never_started(role, argv):
    return harness.Side(role, argv, None, "(never started: the server did not listen)", None)


def _text(b):
    if b is None:
        return ""
    return b.decode(errors="replace") if isinstance(b, bytes) else b


def _quote(argv):
    return " ".join("'" + a.replace("'", "'\\''") + "'" for a in argv)


def guest_server_script(argv, meeting, tcp_port, marker):
    """Runs the server; touches /jobs/MARKER once it listens on its TCP port
    (read from /proc/net/tcp, so its single accept() is not used up), or at
    once for rdma_cm (the client retries while refused)."""
    if meeting is Meeting.RDMA_CM:
        return f"touch /jobs/{marker}\nexec {_quote(argv)}"
    return f"""{_quote(argv)} &
p=$!
i=0
while [ $i -lt 1200 ]; do
  grep -q ':{tcp_port:04X} 00000000:0000 0A' /proc/net/tcp && break
  [ "$(cut -d' ' -f3 /proc/$p/stat 2>/dev/null)" = Z ] && break
  i=$((i+1)); usleep 25000
done
touch /jobs/{marker}
wait $p"""


def guest_client_script(argv, meeting):
    """Runs the client; for rdma_cm, again while the connection is refused
    (the server is not listening yet), for at most CM_RETRY_SECONDS."""
    if meeting is Meeting.TCP:
        return f"exec {_quote(argv)}"
    signs = "|".join(REFUSED_SIGNS)
    return f"""end=$(( $(date +%s) + {CM_RETRY_SECONDS} ))
n=0
while :; do
  n=$((n+1))
  {_quote(argv)} > /tmp/client.$$ 2>&1
  rc=$?
  cat /tmp/client.$$
  [ $rc = 0 ] && exit 0
  grep -qE '{signs}' /tmp/client.$$ || exit $rc
  [ $(date +%s) -ge $end ] && exit $rc
  echo "(attempt $n refused, again)"
  usleep 200000
done"""


# Egress: RoCE v2 (UDP 4791) into a prio band with netem. Ingress: the same
# packets redirected to ifb0, whose root qdisc is netem. Full paths: the
# guest's busybox shell runs its own (smaller) tc and ip applets first.
LOSS_ON = """set -e
/usr/bin/tc qdisc add dev eth0 root handle 1: prio
/usr/bin/tc qdisc add dev eth0 parent 1:3 handle 30: netem loss {p}%
/usr/bin/tc filter add dev eth0 parent 1:0 protocol ip prio 1 u32 match ip dport 4791 0xffff flowid 1:3
/usr/bin/ip link show ifb0 >/dev/null 2>&1 || /usr/bin/ip link add ifb0 type ifb  # ifb makes ifb0 when loaded
/usr/bin/ip link set ifb0 up
/usr/bin/tc qdisc add dev ifb0 root netem loss {p}%
/usr/bin/tc qdisc add dev eth0 handle ffff: ingress
/usr/bin/tc filter add dev eth0 parent ffff: protocol ip prio 1 u32 match ip dport 4791 0xffff action mirred egress redirect dev ifb0
"""
LOSS_OFF = """/usr/bin/tc qdisc del dev eth0 root
/usr/bin/tc qdisc del dev ifb0 root
/usr/bin/tc qdisc del dev eth0 ingress
true
"""
