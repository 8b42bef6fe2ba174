"""A server and a client of a stock librdmacm program, each run through a
uroced (on one loopback daemon, or on two daemons in two network
namespaces), with the client started only once the server's daemon lists
the server's rdma_cm id in LISTEN on its port (`uroce cm`, the daemon's
`rdma resource show cm_id`; docs/rdmacm-device.md, "Listing the ids").

The client is not retried on a refusal (REJ 8, SIDR status 1): once the
listener is there a refusal is a failure, not the client being early. The
one exception is a server that listens twice (perftest -R, see CmPair).
Every wait is bounded; every process is stopped by its PID.
"""

import json
import subprocess
import sys
import tempfile
import time

from uroce_harness import _track, _untrack, tail

# Bounds: the server's listener must show within LISTEN_SECONDS; each
# program runs at most RUN_SECONDS.
LISTEN_SECONDS = 20
RUN_SECONDS = 60
POLL_SECONDS = 0.01

# What a refused client prints: rping, rdma_client, rstream ("REJECTED",
# "rejected"), perftest (event 8, REJECTED), udaddy (SIDR status 1: nobody
# listens).
REFUSED_SIGNS = ("REJECTED", "rejected", "Connection refused", "Unexpected CM event bl blka 8",
                 "UNREACHABLE, error: 1")


def daemon_of(side):
    """A Daemon, or a harness Endpoint (its .daemon)."""
    return getattr(side, "daemon", side)


def cm_ids(daemon):
    """`uroce cm --json` of `daemon`: its rdma_cm ids, one dict each (ifname,
    port, lqpn, qp-type, state, ps, pid, comm, cm-idn, src-addr, src-port,
    dst-addr, dst-port; the ones nldev leaves out are missing). The control
    socket is a path, so this runs outside the daemon's namespace."""
    r = subprocess.run([daemon.uroce, "cm", "--json", "--state-dir", daemon.state, "--device", daemon.name],
                       capture_output=True, text=True, timeout=30)
    if r.returncode != 0:
        raise AssertionError(f"uroce cm failed: {r.stdout}{r.stderr}")
    return json.loads(r.stdout)


def listener(daemon, port, pid=None, ps="TCP"):
    """The LISTEN id of port `port` (port space `ps`) on `daemon`, owned by
    process `pid` if given, or None."""
    for e in cm_ids(daemon):
        if e["state"] == "LISTEN" and e.get("src-port") == port and e["ps"] == ps and pid in (None, e["pid"]):
            return e
    return None


def wait_listener(daemon, port, proc, ps="TCP", seconds=LISTEN_SECONDS):
    """Waits until `proc` (a Popen of a program run through `daemon`, which
    execs in place: its pid is the program's) has an id in LISTEN on `port`.
    Returns the id, or None when the process exited first (its output says
    why); raises when the deadline passes."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return None
        found = listener(daemon, port, proc.pid, ps)
        if found is not None:
            return found
        time.sleep(POLL_SECONDS)
    raise AssertionError(f"no rdma_cm id of pid {proc.pid} in LISTEN on {ps} port {port} within {seconds} s: "
                         f"{cm_ids(daemon)}")


class CmPair:
    """A server program on `server` and a client program on `client` (each a
    Daemon or an Endpoint of one: the daemon the program runs through, in its
    namespace if it has one). run() starts the server, waits until its
    listener on `port` shows (`ps`: "TCP", or "UDP" for udaddy), starts the
    client and waits for both; close() stops what is left, by PID.

    `relisten=True` is for a server that listens twice (perftest -R): a
    control connection, then it destroys that listener and makes a new one
    for the data connection. Only the first listener can be waited for (the
    client, not the test, makes the second connection), so the client's data
    REQ may come in the gap between the two: REJ 8, as Linux's cm.c answers a
    REQ no listener takes. perftest 4.5's own retry after REJECTED cannot
    succeed (it reuses the ids and channel it has just destroyed), so its
    client exits. The pair is then started again, server included (a new
    client against the old server would have its control connection taken
    as the data connection, and both would wait for ever), each time after
    waiting for the new server's listener, within `listen_seconds`.

    `refusals` counts the clients that were refused (0 unless relisten)."""

    def __init__(self, server, client, server_argv, client_argv, port, *, ps="TCP", relisten=False,
                 run_seconds=RUN_SECONDS, listen_seconds=LISTEN_SECONDS):
        self.server_daemon = daemon_of(server)
        self.client_daemon = daemon_of(client)
        self.server_argv = list(server_argv)
        self.client_argv = list(client_argv)
        self.port = port
        self.ps = ps
        self.relisten = relisten
        self.run_seconds = run_seconds
        self.listen_seconds = listen_seconds
        self.server = None
        self.server_log = None
        self.refusals = 0
        self.listened = None  # the listener's entry in `uroce cm`, once seen
        _track(self)  # stopped with the rest on SIGTERM

    def start_server(self):
        # A file, not a pipe: nobody reads while the client runs, and a
        # verbose server would block on a full pipe.
        self.server_log = tempfile.TemporaryFile(mode="w+")
        self.server = subprocess.Popen(self.server_daemon.exec_argv(*self.server_argv), stdout=self.server_log,
                                       stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True)
        self.listened = wait_listener(self.server_daemon, self.port, self.server, self.ps, self.listen_seconds)
        return self.listened is not None

    def run_client(self):
        try:
            c = subprocess.run(self.client_daemon.exec_argv(*self.client_argv), capture_output=True, text=True,
                               stdin=subprocess.DEVNULL, timeout=self.run_seconds)
            return c.returncode, c.stdout + c.stderr
        except subprocess.TimeoutExpired as e:  # killed: report what it printed
            out = (e.stdout or b"").decode(errors="replace") + (e.stderr or b"").decode(errors="replace")
            return -9, f"client timed out after {self.run_seconds} s\n{out}"

    def run(self, server_stays=False):
        """Runs the pair: (client exit status, client output, server exit
        status, server output). A server that serves until stopped (cmtime)
        is killed once the client is done when `server_stays`, and counts as
        exit 0. A server that never listened has its output returned and the
        client is not run (exit None)."""
        deadline = time.monotonic() + self.listen_seconds
        while True:
            if not self.start_server():
                return None, "(not run: the server exited before it listened)", *self.finish_server(False)
            crc, cout = self.run_client()
            refused = crc != 0 and any(sign in cout for sign in REFUSED_SIGNS)
            if refused:
                self.refusals += 1
                print(f"rdma_cm_pair: {self.client_argv[0]} client refused ({self.refusals})", file=sys.stderr)
            if not (refused and self.relisten) or time.monotonic() > deadline:
                break
            self.stop_server()
        return crc, cout, *self.finish_server(server_stays)

    def finish_server(self, server_stays):
        if server_stays and self.server.poll() is None:
            self.server.kill()
            self.server.wait()
            self.server.returncode = 0
        try:
            self.server.wait(timeout=self.run_seconds)
        except subprocess.TimeoutExpired:
            self.server.kill()
            self.server.wait()
        self.server_log.seek(0)
        return self.server.returncode, self.server_log.read()

    def stop_server(self):
        if self.server is not None and self.server.poll() is None:
            self.server.kill()
            self.server.wait()
        if self.server_log is not None:
            self.server_log.close()
            self.server_log = None

    def close(self):
        _untrack(self)
        self.stop_server()

    def __repr__(self):
        return f"CmPair({' '.join(self.server_argv)})"

    def describe(self, cout, sout):
        return f"client:\n{tail(cout)}\nserver:\n{tail(sout)}\nrefused clients: {self.refusals}"
