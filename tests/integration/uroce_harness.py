"""Shared pieces of the integration tests that run uroced and stock verbs
programs through it: a daemon in its own state directory (on the loopback
port, or on net_af_packet inside a network namespace), two network namespaces
joined by a veth pair, and server/client program pairs that exchange their
addresses over TCP (ibv_*_pingpong, perftest, the project's byte_check).

Every wait is bounded and every process this module starts is stopped by its
PID. A SIGTERM (meson's timeout) stops them and removes the namespaces before
the test exits.
"""

import atexit
import json
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

SKIP = 77  # meson's exit status for a skipped test

_live = []  # objects with close(), most recent last: what a SIGTERM must clean up


def _close_all():
    while _live:
        obj = _live.pop()
        try:
            obj.close()
        except Exception as e:  # cleanup goes on for the others
            print(f"cleanup of {obj!r}: {e}", file=sys.stderr)


def _on_sigterm(signum, _frame):
    print(f"harness: signal {signum}: stopping every daemon and program, removing namespaces", file=sys.stderr)
    _close_all()
    os._exit(1)


atexit.register(_close_all)
signal.signal(signal.SIGTERM, _on_sigterm)


def _track(obj):
    _live.append(obj)
    return obj


def _untrack(obj):
    if obj in _live:
        _live.remove(obj)


def tail(text, lines=40):
    rows = text.splitlines()
    cut = rows[-lines:]
    return ("[... %d lines]\n" % (len(rows) - len(cut)) if len(rows) > len(cut) else "") + "\n".join(cut)


def wait_for(condition, seconds, interval=0.05):
    """Polls `condition` until it holds or `seconds` pass; its last answer."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(interval)
    return condition()


def missing_tools(names):
    return [n for n in names if shutil.which(n) is None]


def perftest_row(output):
    """perftest's result table as {column: value}: the header line that
    starts with #bytes and the first row of numbers under it; None when the
    run printed no result. A figure perftest could not compute (its
    standard deviation when its clock misbehaves, as under QEMU's TCG) is
    printed `-nan` or `inf` and read as such."""
    lines = output.splitlines()
    for i, line in enumerate(lines):
        if line.strip().startswith("#bytes"):
            names = [n.strip() for n in re.findall(r"#bytes|#iterations|[^\s\[\]#][^\[\]#]*?\[[^\]]+\]", line)]
            for row in lines[i + 1:]:
                values = row.split()
                if values and all(re.fullmatch(r"[\d.]+|-?nan|-?inf", v) for v in values):
                    return dict(zip(names, (float(v) for v in values)))
            return None
    return None


def median_of(runs, figure):
    """The median of `figure` over the runs (dicts) that measured it, or
    None when none did (benchmarks: a failed run leaves it out)."""
    values = [r[figure] for r in runs if r.get(figure) is not None]
    return statistics.median(values) if values else None


def free_tcp_port():
    """A TCP port nothing listens on now (the tests that use it run one at a time)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_listening(port, proc, seconds=20, proto="tcp"):
    """Waits until `proc` (or anything in its network namespace) listens on
    `port` (TCP), or has a socket bound to it (proto="udp"). Reads
    /proc/PID/net/{tcp,udp}*, which shows the namespace of that process, so
    the server's single accept() is not used up by a probe. Returns False if
    the process exited first (its output says why)."""
    state = "0A" if proto == "tcp" else "07"  # TCP_LISTEN; TCP_CLOSE is how an unconnected UDP socket shows
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return False
        for table in (proto, proto + "6"):
            try:
                with open(f"/proc/{proc.pid}/net/{table}") as f:
                    rows = f.readlines()[1:]
            except (FileNotFoundError, ProcessLookupError):
                continue
            for row in rows:
                fields = row.split()
                if fields[3] == state and int(fields[1].rsplit(":", 1)[1], 16) == port:
                    return True
        time.sleep(0.01)
    raise AssertionError(f"nothing listened on {proto.upper()} port {port} within {seconds} s")


def build_sides(side_values, daemon_arg_values, minimum=1):
    """The benchmarks' `--side LABEL=BUILD_DIR` and `--daemon-arg LABEL=ARG`
    options: ([(label, absolute build dir)], {label: [extra uroced args]});
    a clear SystemExit for a malformed value, a repeated label or an
    argument for an unknown side."""
    def pairs(values, what):
        for v in values:
            label, sep, rest = v.partition("=")
            if not sep or not label:
                raise SystemExit(f"{what} wants LABEL=VALUE, not {v!r}")
            yield label, rest

    sides = [(label, os.path.abspath(build)) for label, build in pairs(side_values, "--side")]
    if len(sides) < minimum or len({label for label, _ in sides}) != len(sides):
        raise SystemExit(f"give {minimum} or more --side with distinct labels")
    extra = {label: [] for label, _ in sides}
    for label, arg in pairs(daemon_arg_values, "--daemon-arg"):
        if label not in extra:
            raise SystemExit(f"--daemon-arg for an unknown side {label!r}")
        extra[label].append(arg)
    return sides, extra


class Daemon:
    """One uroced in its own state directory: on the loopback port, or on a
    DPDK port inside network namespace `netns`."""

    def __init__(self, uroced, uroce, *, name, ip, port="loopback", netns=None, extra=(), ready_seconds=60,
                 wrapper=()):
        self.uroce = uroce
        self.name = name
        self.ip = ip
        self.netns = netns
        self.tmp = tempfile.TemporaryDirectory(prefix=f"{name}-")
        self.state = self.tmp.name
        self.log_path = os.path.join(self.state, "uroced.log")
        self._log = open(self.log_path, "w")
        # wrapper: a program that runs the daemon (valgrind for tools/bench/instructions.py)
        argv = [*wrapper, uroced, "--port", port, "--ip", ip, "--name", name, "--state-dir", self.state, *extra]
        self.argv = self.in_netns(argv)
        self.proc = subprocess.Popen(self.argv, stdout=self._log, stderr=subprocess.STDOUT)
        _track(self)
        r = subprocess.run([uroce, "status", "--state-dir", self.state, "--device", name, "--wait", str(ready_seconds)],
                           capture_output=True, text=True, timeout=ready_seconds + 30)
        if r.returncode != 0:
            self.close()
            raise RuntimeError(f"uroced did not become ready: {' '.join(self.argv)}\n{r.stderr}\n{self.log_text()}")
        self.status_text = r.stdout

    def __repr__(self):
        return f"Daemon({self.name}, {self.netns or 'host'})"

    def in_netns(self, argv):
        return (["ip", "netns", "exec", self.netns] if self.netns else []) + list(argv)

    def exec_argv(self, *argv):
        """The command line that runs `argv` as a client of this daemon, in its
        namespace, line-buffered so a killed program's output is kept."""
        return self.in_netns(["stdbuf", "-oL", "-eL", self.uroce, "exec", "--state-dir", self.state, "--", *argv])

    def gid_index(self, gid_type="RoCE v2"):
        """The index of this daemon's IPv4 GID of `gid_type`, read from the tree
        it publishes for libibverbs."""
        octets = [int(x) for x in self.ip.split(".")]
        want = "0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x" % tuple(octets)
        port = os.path.join(self.state, "sys/class/infiniband", self.name, "ports/1")
        for i in range(16):
            with open(os.path.join(port, "gids", str(i))) as f:
                gid = f.read().strip()
            with open(os.path.join(port, "gid_attrs/types", str(i))) as f:
                typ = f.read().strip()
            if gid == want and typ == gid_type:
                return i
        raise AssertionError(f"{self.name}: no {gid_type} GID for {self.ip}")

    def active_mtu(self):
        m = re.search(r"active MTU (\d+)", self.status_text)
        return int(m.group(1))

    def alive(self):
        return self.proc.poll() is None

    def pin_to(self, cpu):
        """Every thread of the daemon on processor `cpu` (benchmarks: the
        programs and the daemon stop trading places between rounds, the
        largest noise on a 2-core machine)."""
        for tid in os.listdir(f"/proc/{self.proc.pid}/task"):
            os.sched_setaffinity(int(tid), {cpu})

    def stats(self):
        """`uroce stats --json` of this daemon: {group: {counter: value}, 'mrs': [...]} (docs/stats.md)."""
        r = subprocess.run([self.uroce, "stats", "--json", "--state-dir", self.state, "--device", self.name],
                           capture_output=True, text=True, timeout=30)
        if r.returncode != 0:
            raise AssertionError(f"uroce stats failed: {r.stderr}")
        return json.loads(r.stdout)

    def flat_counters(self):
        """The engine's counters with the fault hook's as 'faults.NAME' and the
        receive drops by reason as 'dropped.NAME', in one dict."""
        s = self.stats()
        return {**s["engine"], **{f"faults.{k}": v for k, v in s["faults"].items()},
                **{f"dropped.{k}": v for k, v in s["engine_dropped"].items()}}

    def log_text(self):
        self._log.flush()
        with open(self.log_path) as f:
            return f.read()

    def close(self):
        _untrack(self)
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()
        self.tmp.cleanup()


class HostedDevice(Daemon):
    """A device another Daemon's process serves (uroced --device ...,
    docs/daemon.md "Several devices in one daemon"): its own name, address,
    namespace and state directory, the host's process and log."""

    def __init__(self, host, *, name, ip, netns, state, ready_seconds=60):
        self.host = host
        self.uroce = host.uroce
        self.name = name
        self.ip = ip
        self.netns = netns
        self.state = state
        self.proc = host.proc
        r = subprocess.run([self.uroce, "status", "--state-dir", state, "--device", name, "--wait",
                            str(ready_seconds)], capture_output=True, text=True, timeout=ready_seconds + 30)
        if r.returncode != 0:
            raise RuntimeError(f"{name} of {host.name}'s uroced did not become ready\n{r.stderr}\n{host.log_text()}")
        self.status_text = r.stdout

    def __repr__(self):
        return f"HostedDevice({self.name} of {self.host.name}, {self.netns or 'host'})"

    def log_text(self):
        return self.host.log_text()

    def close(self):
        pass  # the host's process goes with the host; the state directory with the Topology


class VethNamespaces:
    """Two network namespaces joined by a veth pair, each end with an IPv4
    address the kernel owns too (the programs' TCP exchange uses it) and that
    the uroced on that end announces as its RoCE v2 GID. Nothing is created
    outside the two namespaces."""

    PREFIX = "urdf"  # this suite's namespaces: urdf<pid>a, urdf<pid>b

    def __init__(self, subnet="10.77.0", mtu=1500):
        self.remove_stale()
        pid = os.getpid()
        self.ns = [f"{self.PREFIX}{pid}a", f"{self.PREFIX}{pid}b"]
        self.ifname = ["urdfa", "urdfb"]
        self.ip = [f"{subnet}.1", f"{subnet}.2"]
        self.created = []
        _track(self)
        try:
            for ns in self.ns:
                self._ip("netns", "add", ns)
                self.created.append(ns)
            a, b = self.ns
            self._ip("-n", a, "link", "add", self.ifname[0], "type", "veth", "peer", "name", self.ifname[1], "netns", b)
            for ns, ifname, ip in zip(self.ns, self.ifname, self.ip):
                # No IPv6 on the veth (where the kernel has it): no router
                # solicitations or DAD among the RoCE frames.
                subprocess.run(["ip", "netns", "exec", ns, "sh", "-c",
                                f"echo 1 > /proc/sys/net/ipv6/conf/{ifname}/disable_ipv6"],
                               capture_output=True, timeout=30)
                self._ip("-n", ns, "link", "set", ifname, "mtu", str(mtu), "up")
                self._ip("-n", ns, "addr", "add", f"{ip}/24", "dev", ifname)
                self._ip("-n", ns, "link", "set", "lo", "up")
        except BaseException:
            self.close()
            raise

    def __repr__(self):
        return f"VethNamespaces({self.ns})"

    @staticmethod
    def _ip(*args):
        subprocess.run(["ip", *args], check=True, capture_output=True, text=True, timeout=30)

    @staticmethod
    def run(ns, argv, **kw):
        return subprocess.run(["ip", "netns", "exec", ns, *argv], check=True, capture_output=True, text=True,
                              timeout=30, **kw)

    @classmethod
    def remove_stale(cls):
        """Namespaces this suite left behind in a run that was killed (their PID is gone)."""
        r = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, timeout=30)
        for line in r.stdout.splitlines():
            m = re.match(rf"({cls.PREFIX}(\d+)[ab])\b", line)
            if m and not os.path.exists(f"/proc/{m.group(2)}"):
                subprocess.run(["ip", "netns", "del", m.group(1)], capture_output=True, timeout=30)

    def snmp(self, ns):
        """Counters of /proc/net/snmp inside `ns`: {'Icmp': {...}, 'Udp': {...}, ...}."""
        text = self.run(ns, ["cat", "/proc/net/snmp"]).stdout.splitlines()
        out = {}
        for names, values in zip(text[0::2], text[1::2]):
            proto, names = names.split(":", 1)
            out[proto] = dict(zip(names.split(), (int(v) for v in values.split(":", 1)[1].split())))
        return out

    def close(self):
        _untrack(self)
        for ns in reversed(self.created):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=30)
        self.created = []


class Endpoint:
    """Where one side of a program pair runs: a daemon (and its namespace)
    and the address the other side reaches it at over TCP."""

    def __init__(self, daemon, tcp_host):
        self.daemon = daemon
        self.tcp_host = tcp_host
        self.device = daemon.name
        self.gid_index = daemon.gid_index()
        self.mtu = daemon.active_mtu()


class LoopbackDaemon:
    """One loopback uroced as run_pair's topology: both programs on it, over
    127.0.0.1 (the benchmarks' shape: tools/bench)."""

    def __init__(self, daemon):
        self.daemons = [daemon]
        self.server = self.client = Endpoint(daemon, "127.0.0.1")

    def dead_daemons(self):
        return [d.name for d in self.daemons if not d.alive()]

    def daemon_logs(self):
        return "\n".join(f"--- uroced {d.name} log (last lines)\n{tail(d.log_text(), 30)}" for d in self.daemons)


class Topology:
    """The server and client sides of the data tests.

    loopback: one uroced on the embedded loopback port; both programs use its
    device and meet over 127.0.0.1.
    veth: one uroced per namespace on net_af_packet over its end of the veth
    pair, --ip equal to that end's own address; the server runs in the first
    namespace, the client in the second and connects to the server's address.
    loopback-jumbo: the same with --mtu 9000 given explicitly (also the loopback
    port's default; active IB MTU 4096).
    veth-one-daemon: the veth topology served by one uroced (in the first
    namespace) holding both devices: the second is a --device whose
    af_packet port the daemon opens inside the second namespace.
    memif-one-daemon: the memif topology served by one uroced: its two
    devices' memif ports (server and client) meet inside the process.
    veth-jumbo: the same as veth on a veth with a 9000-byte MTU (active IB MTU 4096).
    memif: the same two namespaces and veth (the programs' TCP exchange), but
    the daemons' RoCE frames go over net_memif (shared memory; docs/wires.md)
    between a server and a client memif port, with addresses of their own
    (MEMIF_SUBNET) that the kernel does not own.
    memif-client-first: the memif topology with the client's daemon started
    (and ready) before the server's: its port finds no server socket and
    dials again from its housekeeping (docs/wires.md); the topology is
    ready once the client's log says it connected (bounded wait).
    """

    MEMIF_SUBNET = "10.78.0"

    def __init__(self, kind, uroced, uroce, daemon_args=(), memif_devargs=""):
        self.kind = kind
        self.daemon_args = tuple(daemon_args)  # more uroced flags for every daemon
        # more devargs for every memif port, e.g. ",uroce-wake=no" (docs/wires.md)
        self.memif_devargs = memif_devargs
        self.daemons = []
        self.net = None
        self.memif_dir = None
        self.hosted_dir = None  # the state directory of a device a Daemon hosts
        try:
            if kind in ("loopback", "loopback-jumbo"):
                jumbo = ("--mtu", "9000") if kind == "loopback-jumbo" else ()
                d = Daemon(uroced, uroce, name="uroce_lo", ip="192.0.2.1", extra=jumbo + self.daemon_args)
                self.daemons = [d]
                self.server = Endpoint(d, "127.0.0.1")
                self.client = Endpoint(d, "127.0.0.1")
            elif kind in ("memif", "memif-client-first"):
                self._start_memif(uroced, uroce, client_first=kind == "memif-client-first")
            elif kind in ("veth-one-daemon", "memif-one-daemon"):
                self._start_one_daemon(kind, uroced, uroce)
            elif kind in ("veth", "veth-jumbo"):
                self.net = VethNamespaces(mtu=9000 if kind == "veth-jumbo" else 1500)
                for ns, ifname, ip, name in zip(self.net.ns, self.net.ifname, self.net.ip, ["uroce_a", "uroce_b"]):
                    self.daemons.append(Daemon(uroced, uroce, name=name, ip=ip, port=f"net_af_packet0,iface={ifname}",
                                               netns=ns, extra=self.daemon_args))
                self.server = Endpoint(self.daemons[0], self.net.ip[0])
                self.client = Endpoint(self.daemons[1], self.net.ip[0])
            else:
                raise ValueError(f"unknown topology {kind}")
        except BaseException:
            self.close()
            raise

    MEMIF_CONNECTED = "memif client connected to its server"

    def _start_memif(self, uroced, uroce, client_first=False):
        self.net = VethNamespaces()
        self.memif_dir = tempfile.TemporaryDirectory(prefix="uroce-memif-")
        socket = os.path.join(self.memif_dir.name, "memif.sock")
        sides = list(zip(self.net.ns, ["server", "client"], [1, 2], ["uroce_a", "uroce_b"]))
        started = {}
        for ns, role, host, name in (reversed(sides) if client_first else sides):
            started[role] = Daemon(uroced, uroce, name=name, ip=f"{self.MEMIF_SUBNET}.{host}",
                                   port=f"net_memif0,role={role},socket={socket}{self.memif_devargs}", netns=ns,
                                   extra=self.daemon_args)
            self.daemons.append(started[role])
        self.daemons = [started["server"], started["client"]]
        if client_first:
            client = started["client"]
            if not wait_for(lambda: self.MEMIF_CONNECTED in client.log_text(), 30):
                raise RuntimeError(f"the memif client started first never connected:\n{tail(client.log_text(), 30)}")
        self.server = Endpoint(self.daemons[0], self.net.ip[0])
        self.client = Endpoint(self.daemons[1], self.net.ip[0])

    def _start_one_daemon(self, kind, uroced, uroce):
        self.net = VethNamespaces()
        self.hosted_dir = tempfile.TemporaryDirectory(prefix="uroce_b-")
        if kind == "memif-one-daemon":
            self.memif_dir = tempfile.TemporaryDirectory(prefix="uroce-memif-")
            socket = os.path.join(self.memif_dir.name, "memif.sock")
            ports = [f"net_memif{i},role={role},socket={socket}{self.memif_devargs}"
                     for i, role in enumerate(("server", "client"))]
            ips = [f"{self.MEMIF_SUBNET}.1", f"{self.MEMIF_SUBNET}.2"]
        else:
            ports = [f"net_af_packet{i},iface={ifname}" for i, ifname in enumerate(self.net.ifname)]
            ips = self.net.ip
        second = f"name=uroce_b,port={ports[1]},ip={ips[1]},state-dir={self.hosted_dir.name},netns={self.net.ns[1]}"
        host = Daemon(uroced, uroce, name="uroce_a", ip=ips[0], port=ports[0], netns=self.net.ns[0],
                      extra=("--device", second) + self.daemon_args)
        self.daemons = [host]
        hosted = HostedDevice(host, name="uroce_b", ip=ips[1], netns=self.net.ns[1], state=self.hosted_dir.name)
        self.server = Endpoint(host, self.net.ip[0])
        self.client = Endpoint(hosted, self.net.ip[0])

    def describe(self):
        if self.kind.endswith("-one-daemon"):
            return (f"one uroced (pid {self.daemons[0].proc.pid}): {self.server.device} in {self.net.ns[0]} "
                    f"<-{self.kind.split('-')[0]}-> {self.client.device} in {self.net.ns[1]} "
                    f"(TCP over the veth, {self.net.ip[0]})")
        if self.kind in ("loopback", "loopback-jumbo"):
            return f"one uroced ({self.server.device}) on the loopback port, TCP over 127.0.0.1"
        if self.kind in ("memif", "memif-client-first"):
            return (f"{self.server.device} in {self.net.ns[0]} <-memif-> {self.client.device} in {self.net.ns[1]} "
                    f"(RoCE over shared memory; TCP over the veth, {self.net.ip[0]})")
        return (f"{self.server.device} in {self.net.ns[0]} on {self.net.ifname[0]} ({self.net.ip[0]}) <-veth-> "
                f"{self.client.device} in {self.net.ns[1]} on {self.net.ifname[1]} ({self.net.ip[1]})")

    def daemon_logs(self):
        return "\n".join(f"--- uroced {d.name} log (last lines)\n{tail(d.log_text(), 30)}" for d in self.daemons)

    def dead_daemons(self):
        return [d.name for d in self.daemons if not d.alive()]

    def close(self):
        for d in reversed(self.daemons):
            d.close()
        self.daemons = []
        if self.net:
            self.net.close()
        if self.memif_dir:
            self.memif_dir.cleanup()
            self.memif_dir = None
        if self.hosted_dir:
            self.hosted_dir.cleanup()
            self.hosted_dir = None


def skip_reason(kind, tools):
    """Why the data tests of `kind` cannot run here, or None."""
    if os.geteuid() != 0:
        if kind in ("veth", "veth-jumbo", "memif", "memif-client-first", "veth-one-daemon", "memif-one-daemon"):
            return "needs root to create network namespaces and a veth pair"
        return "needs root to create /dev/infiniband/uverbs_uroce_lo (see docs/daemon.md for the unprivileged recipe)"
    missing = missing_tools(list(tools) + ["stdbuf"] + (["ip"] if not kind.startswith("loopback") else []))
    if missing:
        return f"not installed: {', '.join(missing)} (tools/setup.sh installs them)"
    return None


class Side:
    """One finished (or killed) program of a pair."""

    def __init__(self, role, argv, returncode, output, killed):
        self.role, self.argv, self.returncode, self.output = role, argv, returncode, output
        self.killed = killed  # why it was killed, or None

    def how(self):
        return f"killed: {self.killed}" if self.killed else f"exit {self.returncode}"

    def first_error(self):
        """The first line that reads like a failure, for the one-line summary."""
        m = re.search(r"(?mi)^.*(couldn't|failed|error|invalid|fail\b|not supported).*$", self.output)
        return m.group(0).strip() if m else None

    def describe(self):
        return f"--- {self.role} ({self.how()}): {' '.join(self.argv)}\n{tail(self.output)}"


def sides_summary(*sides):
    """One line: how each Side ended and the first failure it printed."""
    parts = []
    for side in sides:
        err = side.first_error()
        parts.append(f"{side.role} {side.how()}" + (f" ({err!r})" if err else ""))
    return "; ".join(parts)


class PairResult:
    def __init__(self, server, client, topology):
        self.server, self.client, self.topology = server, client, topology

    def ok(self):
        return self.server.returncode == 0 and self.client.returncode == 0

    def summary(self):
        """One line: how each side ended and the first failure it printed."""
        return sides_summary(self.client, self.server)

    def describe(self):
        dead = self.topology.dead_daemons()
        return "\n".join([self.client.describe(), self.server.describe(),
                          f"--- daemons that died: {', '.join(dead)}" if dead else "--- every uroced still running",
                          self.topology.daemon_logs()])


class _Program:
    def __init__(self, role, argv):
        self.role = role
        self.argv = argv
        self.out = tempfile.TemporaryFile(mode="w+")
        self.proc = subprocess.Popen(argv, stdout=self.out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        self.killed = None
        _track(self)

    def __repr__(self):
        return f"_Program({self.role}, pid {self.proc.pid})"

    def kill(self, why):
        if self.proc.poll() is None:
            self.killed = why
            self.proc.kill()
        self.proc.wait()

    def close(self, why="the test stopped"):
        _untrack(self)
        self.kill(why)

    def finish(self, why):
        self.close(why)
        self.out.seek(0)
        text = self.out.read()
        self.out.close()
        return Side(self.role, self.argv, self.proc.returncode, text, self.killed)


def start_program(role, argv):
    """Starts `argv` with its output collected; finish() (or close()) ends it
    by its PID and returns a Side. Stopped with the others on SIGTERM."""
    return _Program(role, argv)


_hung_in_a_row = 0
HUNG_RUNS_BEFORE_GIVING_UP = 3


def pingpong_last_ack_lost(result, iters, endless_retries=()):
    """ibv_rc_pingpong has no closing handshake: when the ACK of the last
    SEND is lost, the peer has received everything, exits and destroys its
    QP, and the sender retries into nothing until retry_cnt runs out (on any
    RC device). Under injected loss that is a correct outcome: one side of
    `result` (run_pair's, or anything with `server` and `client` Sides)
    finished all `iters` iterations, the other failed only its last SEND
    (wr_id 2, PINGPONG_SEND_WRID) with RETRY_EXC_ERR.

    A side whose device retries without end (rdma_rxe never counts a
    retry_cnt of 7 down, docs/interop.md), named by its role in
    `endless_retries`, never gets that error: it is still resending when it
    is killed at the time limit. The peer having finished means it has
    received all of that side's messages and had all its own ACKed, so a
    SEND's ACK is all the killed side can still have been waiting for."""
    sides = [result.server, result.client]
    finished = [s for s in sides if s.returncode == 0 and re.search(rf"(?m)^{iters} iters in ", s.output)]
    failed = [s for s in sides if s not in finished]
    if len(finished) != 1 or len(failed) != 1:
        return False
    if failed[0].killed is not None:
        return failed[0].role in endless_retries
    return re.search(r"transport retry counter exceeded \(12\) for wr_id 2\b", failed[0].output) is not None


def run_pair(topology, server_args, client_args, tcp_port, timeout=120, grace=3):
    """Runs a server/client pair of a program that meets over TCP.

    server_args and client_args are the programs' own argv (the client's
    includes the server's address). The server starts first; the client starts
    once the server listens. The pair ends when both exit, when either fails
    (the other then has `grace` seconds to finish), or after `timeout` seconds;
    whatever is still running then is killed (by PID) and counts as failed.
    After HUNG_RUNS_BEFORE_GIVING_UP runs in a row hit the time limit, the
    following ones fail at once instead of each waiting for its own limit.
    """
    global _hung_in_a_row
    if _hung_in_a_row >= HUNG_RUNS_BEFORE_GIVING_UP:
        raise AssertionError(f"not run: the previous {_hung_in_a_row} program pairs hung until their time limit")
    server = _Program("server", topology.server.daemon.exec_argv(*server_args))
    client = None
    why = "the test stopped"
    try:
        if wait_listening(tcp_port, server.proc):
            client = _Program("client", topology.client.daemon.exec_argv(*client_args))
        why = f"still running after the {timeout} s limit"
        hung = True
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            procs = [p for p in (server, client) if p is not None]
            codes = [p.proc.poll() for p in procs]
            if all(c is not None for c in codes):
                hung = False
                break
            failed = [p.role for p, c in zip(procs, codes) if c not in (None, 0)]
            if failed and hung:
                deadline = min(deadline, time.monotonic() + grace)
                why = f"still running {grace} s after the {failed[0]} failed"
                hung = False
            time.sleep(0.01)
        _hung_in_a_row = _hung_in_a_row + 1 if hung else 0
    finally:
        server_side = server.finish(why)
        client_side = client.finish(why) if client else Side("client", client_args, None, "(never started: the "
                                                             "server did not listen)", None)
    return PairResult(server_side, client_side, topology)


def run_tests(kind, tools, make_suite, daemon_args=()):
    """main() of a data-test script: SKIP (77) with the reason when it cannot
    run here, else runs `make_suite(topology)`'s unittest suite against a fresh
    topology of `kind` (its daemons given `daemon_args` too) and returns 0 or 1."""
    import unittest
    reason = skip_reason(kind, tools)
    if reason:
        print(f"SKIP: {kind}: {reason}")
        return SKIP
    topo = Topology(kind, *_binaries(), daemon_args=daemon_args)
    try:
        print(f"topology: {topo.describe()}", file=sys.stderr)
        result = unittest.TextTestRunner(verbosity=2, stream=sys.stderr).run(make_suite(topo))
        if topo.dead_daemons():
            print(f"FAIL: uroced died during the tests: {topo.dead_daemons()}\n{topo.daemon_logs()}", file=sys.stderr)
            return 1
        return 0 if result.wasSuccessful() else 1
    finally:
        topo.close()


_UROCED = _UROCE = None


def set_binaries(uroced, uroce):
    global _UROCED, _UROCE
    _UROCED, _UROCE = os.path.abspath(uroced), os.path.abspath(uroce)


def _binaries():
    return _UROCED, _UROCE


class TestbedNode:
    """One node of a `uroce testbed` (docs/ci-testbed.md), seen as a Daemon
    is by run_pair and Endpoint: its programs run through `uroce testbed
    exec`."""

    def __init__(self, uroce, testbed, env, info):
        self.uroce, self.testbed, self.env = uroce, testbed, env
        self.node = info["node"]
        self.name = info["device"]
        self.ip = info["ipv4"]
        self.ipv6 = info["ipv6"]
        self.netns = info["netns"]
        self.state = info["state_dir"]
        self.log_path = info["log"]
        self.pid = info["pid"]
        r = subprocess.run([uroce, "status", "--state-dir", self.state, "--device", self.name], capture_output=True,
                           text=True, timeout=30, env=env)
        if r.returncode != 0:
            raise AssertionError(f"{self.node}: uroce status failed: {r.stderr}")
        self.status_text = r.stdout

    gid_index = Daemon.gid_index
    active_mtu = Daemon.active_mtu

    def __repr__(self):
        return f"TestbedNode({self.testbed}/{self.node})"

    def exec_argv(self, *argv):
        return ["env", f"UROCE_TESTBED_DIR={self.env['UROCE_TESTBED_DIR']}", "stdbuf", "-oL", "-eL", self.uroce,
                "testbed", "exec", "--name", self.testbed, self.node, "--", *argv]

    def alive(self):
        try:
            with open(f"/proc/{self.pid}/stat") as f:
                return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
        except (FileNotFoundError, ProcessLookupError):
            return False

    def log_text(self):
        try:
            with open(self.log_path) as f:
                return f.read()
        except FileNotFoundError:
            return "(no log)"


class Testbed:
    """`uroce testbed up` with its records in a directory of this test
    (UROCE_TESTBED_DIR), `down` on close(), also on SIGTERM. server is node
    n1, client node n2 reaching n1's address (as Topology does)."""

    def __init__(self, uroce, name, *up_args):
        self.uroce = uroce
        self.name = name
        self.tmp = tempfile.TemporaryDirectory(prefix=f"uroce-testbed-{name}-")
        self.env = dict(os.environ, UROCE_TESTBED_DIR=self.tmp.name)
        _track(self)
        self.up = self.run("up", "--name", name, *up_args)
        if self.up.returncode != 0:
            self.close()
            raise RuntimeError(f"uroce testbed up failed:\n{self.up.stdout}\n{self.up.stderr}")
        self.record = self.status_json()
        self.nodes = [TestbedNode(uroce, name, self.env, n) for n in self.record["nodes"]]
        self.server = Endpoint(self.nodes[0], self.nodes[0].ip)
        self.client = Endpoint(self.nodes[1], self.nodes[0].ip)

    def __repr__(self):
        return f"Testbed({self.name})"

    def run(self, *args, timeout=120):
        return subprocess.run([self.uroce, "testbed", *args], capture_output=True, text=True, timeout=timeout,
                              env=self.env)

    def status_json(self):
        r = self.run("status", "--json", self.name)
        records = json.loads(r.stdout) if r.stdout.strip() else []
        if len(records) != 1:
            raise AssertionError(f"uroce testbed status --json {self.name}: {r.stdout}\n{r.stderr}")
        return records[0]

    def describe(self):
        return f"uroce testbed {self.name}: " + ", ".join(f"{n.node} {n.ip} in {n.netns}" for n in self.nodes)

    def daemon_logs(self):
        return "\n".join(f"--- uroced {n.node} log (last lines)\n{tail(n.log_text(), 30)}" for n in self.nodes)

    def dead_daemons(self):
        return [n.node for n in getattr(self, "nodes", []) if not n.alive()]

    def down(self):
        """`uroce testbed down`; returns its CompletedProcess."""
        _untrack(self)
        return self.run("down", self.name)

    def close(self):
        if self in _live:
            r = self.down()
            if r.returncode != 0:
                print(f"uroce testbed down {self.name}: {r.stdout}{r.stderr}", file=sys.stderr)
        self.tmp.cleanup()
