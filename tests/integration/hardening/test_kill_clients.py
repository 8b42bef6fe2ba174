#!/usr/bin/env python3
"""Clients SIGKILLed at random points in registration, connection and
transfer; the daemon gets back every object, fd, mapping and byte.

usage: test_kill_clients.py UROCED UROCE CHURN

One uroced on the loopback port. `churn` (churn.c) clients run through
`uroce exec`, several at once; each prints the phase it enters. For each the
test picks a phase and a delay (seeded, the seed is printed): once the
client says it entered that phase, it is SIGKILLed after the delay, and the
phase it last printed is where the kill landed. A client that ends by itself
or prints FAIL fails the test.

Before the cycles, one warm-up round (one client per slot, killed in
transfer) and a baseline of the daemon's resident memory (VmRSS), open fds
(/proc/PID/fd) and mappings (/proc/PID/maps). After each half of the
cycles, bounded polls until the daemon's objects (STATUS: clients, PDs,
MRs, MWs, relaxed pools, CQs, QPs, SRQs, AHs; `uroce stats --json`: MRs,
shared mappings of client memory) are back to none, and its fds and
mappings back to the baseline; its RSS may grow within the tolerances below.
Then a fresh ibv_rc_pingpong -c pair through the same daemon must pass.

Environment: UROCE_KILL_CYCLES (default 1000; tools/fuzz.sh-style long
runs: 10000), UROCE_KILL_SEED (default: from the clock), UROCE_KILL_PARALLEL
(clients alive at once, default 4). Exit 77 (skipped) without root (the
device node in /dev/infiniband) or ibv_rc_pingpong.
"""

import argparse
import json
import os
import random
import re
import select
import signal
import struct
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, os.path.join(HERE, "..", "daemon"))
sys.path.insert(0, os.path.join(HERE, "..", "dataflow"))
import uroce_harness as harness  # noqa: E402
from uroce_control import Client  # noqa: E402
from test_pingpong import check_pingpong, pingpong_argv  # noqa: E402

PHASES = ("registration", "connection", "transfer")
# How long after a client enters its chosen phase the kill comes: uniform in
# [0, window) seconds. Measured on 2 busy cores: registration (libibverbs
# loading, the device, a PD, 6 MRs up to 16 MiB) takes 20-60 ms, connection
# (CQs, a channel, an SRQ, 2 QPs to RTS, an AH) 5-20 ms; transfer never ends.
# A kill that comes after the phase ended lands in the next one; the test
# records where each landed, not where it was aimed.
KILL_WINDOW = {"registration": 0.040, "connection": 0.015, "transfer": 0.060}
# Each phase must take at least this share of the kills.
MIN_PHASE_SHARE = 0.10
PHASE_TIMEOUT = 30.0     # a client that does not reach its phase by then has hung
SETTLE_SECONDS = 30.0    # bound on the daemon's reclaiming after the last kill
# The daemon's resident memory, VmRSS, is measured after the warm-up (the
# baseline) and once the clients of each half of the cycles are reclaimed.
# It grows a little at first and then levels off (measured: +290 KiB after
# 60 cycles, +820 KiB after 1000, +1020 KiB after 3000): glibc keeps freed
# heap, fragmented by the interleaved lives of PARALLEL clients' objects, for
# reuse instead of returning it, and hash tables keep the buckets they grew
# to. So the whole run may add RSS_TOLERANCE_KIB, and the second half, by
# when that has levelled off, RSS_SECOND_HALF_TOLERANCE_KIB: a leak of 1 KiB
# per killed client over a 1000-cycle run exceeds the latter, a leaked large
# MR (16 MiB of client memory mapped) either at once.
RSS_TOLERANCE_KIB = 2048
RSS_SECOND_HALF_TOLERANCE_KIB = 384
MAX_REPORTED_FAILURES = 5


class Churn:
    """One churn client: started, watched for its phase lines, killed."""

    def __init__(self, daemon, churn, target, delay):
        argv = daemon.exec_argv(churn, "-d", daemon.name, "-g", str(daemon.gid_index()))
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        os.set_blocking(self.proc.stdout.fileno(), False)
        self.target, self.delay = target, delay
        self.started = time.monotonic()
        self.kill_at = None
        self.killed = False
        self.output = b""

    def fileno(self):
        return self.proc.stdout.fileno()

    def read(self):
        """Takes what the client printed; False at EOF."""
        try:
            data = os.read(self.fileno(), 65536)
        except BlockingIOError:
            return True
        self.output += data
        if self.kill_at is None and f"phase {self.target}\n".encode() in self.output:
            self.kill_at = time.monotonic() + self.delay
        return bool(data)

    def deadline(self):
        return self.kill_at if self.kill_at is not None else self.started + PHASE_TIMEOUT

    def kill(self):
        self.killed = True
        self.proc.kill()

    def finish(self):
        """Waits for the process and its last output; returns (phase it
        landed in, or None, and what went wrong, or None)."""
        self.proc.wait()
        while self.read():
            pass
        self.proc.stdout.close()
        text = self.output.decode(errors="replace")
        phases = re.findall(r"(?m)^phase (\w+)$", text)
        landed = phases[-1] if phases else None
        if "FAIL" in text or not self.killed or self.proc.returncode != -signal.SIGKILL:
            how = f"exit {self.proc.returncode}" + (" before its kill" if not self.killed else "")
            return landed, f"client aimed at {self.target} (+{self.delay * 1000:.1f} ms), {how}:\n{text}"
        if self.kill_at is None:
            return landed, f"client never reached phase {self.target} in {PHASE_TIMEOUT} s:\n{text}"
        return landed, None


def run_cycles(daemon, churn, cycles, parallel, rng, landed, failures, on_start=None):
    """Runs `cycles` churn clients, `parallel` at a time, each killed as drawn."""
    started = 0
    live = []
    while started < cycles or live:
        while started < cycles and len(live) < parallel and len(failures) < MAX_REPORTED_FAILURES:
            target = rng.choice(PHASES) if on_start is None else on_start
            live.append(Churn(daemon, churn, target, rng.uniform(0, KILL_WINDOW[target])))
            started += 1
        if not live:
            break
        wait = max(0.0, min(c.deadline() for c in live) - time.monotonic())
        readable, _, _ = select.select(live, [], [], wait)
        for c in readable:
            c.read()
        now = time.monotonic()
        for c in list(live):
            if c.proc.poll() is not None or now >= c.deadline():
                if c.proc.poll() is None:
                    c.kill()
                live.remove(c)
                phase, problem = c.finish()
                if problem:
                    failures.append(problem)
                elif phase:
                    landed[phase] += 1
                    landed["after data"] += "\ndata checked\n" in "\n" + c.output.decode(errors="replace")


def daemon_objects(daemon):
    """Everything the daemon holds for clients, from STATUS and `uroce stats
    --json` (the asking connection is the one client left)."""
    c = Client(os.path.join(daemon.state, f"{daemon.name}.sock"))
    try:
        status, body, _ = c.call(14)  # STATUS
        assert status == 0
        counts = dict(zip(["clients", "pds", "mrs", "mws", "relaxed_pools"], struct.unpack_from("<5I", body, 0)))
        counts.update(zip(["cqs", "qps", "srqs", "ahs"], struct.unpack_from("<4I", body, 48)))
    finally:
        c.close()
    r = subprocess.run([daemon.uroce, "stats", "--json", "--state-dir", daemon.state, "--device", daemon.name],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    stats = json.loads(r.stdout)
    counts["clients"] -= 1
    counts["listed_mrs"] = len(stats["mrs"])
    counts["shared_mappings"] = stats["dma"]["shared_mappings"]
    counts.update({f"mrs_{way}": n for way, n in stats["mr_ways"].items()})
    return counts


def process_usage(pid):
    """The daemon's resident memory (KiB), open fds and mappings."""
    with open(f"/proc/{pid}/status") as f:
        rss = int(re.search(r"(?m)^VmRSS:\s+(\d+) kB$", f.read()).group(1))
    with open(f"/proc/{pid}/maps") as f:
        maps = sum(1 for _ in f)
    return {"rss_kib": rss, "fds": len(os.listdir(f"/proc/{pid}/fd")), "maps": maps}


def settle(daemon, baseline=None, seconds=SETTLE_SECONDS):
    """Polls until the daemon holds no client object (and, given a baseline,
    its fds and mappings are back to it). Returns (objects, usage, met)."""
    deadline = time.monotonic() + seconds
    while True:
        objects = daemon_objects(daemon)
        usage = process_usage(daemon.proc.pid)
        met = all(v == 0 for v in objects.values()) and (
            baseline is None or (usage["fds"] == baseline["fds"] and usage["maps"] == baseline["maps"]))
        if met or time.monotonic() >= deadline:
            return objects, usage, met
        time.sleep(0.05)


def fresh_pingpong(topo):
    """A checked ibv_rc_pingpong through the daemon that outlived the kills."""
    port = harness.free_tcp_port()
    server = pingpong_argv(topo.server, "ibv_rc_pingpong", 4096, False, port)
    client = pingpong_argv(topo.client, "ibv_rc_pingpong", 4096, False, port) + [topo.server.tcp_host]
    return harness.run_pair(topo, server, client, port, timeout=60)


class Failed(Exception):
    pass


def run(topo, churn, cycles, parallel, seed):
    import unittest
    d = topo.server.daemon
    rng = random.Random(seed)
    tc = unittest.TestCase()
    landed = dict.fromkeys(PHASES + ("after data",), 0)
    failures = []

    run_cycles(d, churn, parallel, parallel, rng, dict(landed), failures, on_start="transfer")
    if failures:
        raise Failed("warm-up:\n" + failures[0])
    objects, baseline, met = settle(d)
    if not met:
        raise Failed(f"after the warm-up the daemon still holds {objects}")
    print(f"baseline after the warm-up: {baseline}", file=sys.stderr)

    t0 = time.monotonic()
    usage = {}
    for half, n in (("first half", cycles // 2), ("second half", cycles - cycles // 2)):
        run_cycles(d, churn, n, parallel, rng, landed, failures)
        if failures:
            raise Failed(f"{len(failures)} client(s) failed before their kill; the first:\n{failures[0]}")
        if not d.alive():
            raise Failed(f"uroced died\n{topo.daemon_logs()}")
        t1 = time.monotonic()
        objects, usage[half], met = settle(d, baseline)
        print(f"after the {half} ({time.monotonic() - t1:.2f} s to settle): {usage[half]}, objects {objects}",
              file=sys.stderr)
        tc.assertEqual({k: v for k, v in objects.items() if v}, {}, "objects the daemon still holds for dead clients")
        tc.assertEqual(usage[half]["fds"], baseline["fds"], f"open fds: {os.listdir(f'/proc/{d.proc.pid}/fd')}")
        tc.assertEqual(usage[half]["maps"], baseline["maps"], "mappings (/proc/PID/maps lines)")
    took = time.monotonic() - t0
    print(f"{cycles} cycles in {took:.1f} s ({cycles / took:.1f}/s, {parallel} at once); kills landed in {landed}",
          file=sys.stderr)
    first, second = usage["first half"]["rss_kib"], usage["second half"]["rss_kib"]
    tc.assertLessEqual(second - baseline["rss_kib"], RSS_TOLERANCE_KIB, "VmRSS growth over the run, KiB")
    tc.assertLessEqual(second - first, RSS_SECOND_HALF_TOLERANCE_KIB, "VmRSS growth over the second half, KiB")
    least = max(1, int(cycles * MIN_PHASE_SHARE))
    for phase in PHASES:
        tc.assertGreaterEqual(landed[phase], least, f"kills that landed in {phase}: {landed}")
    tc.assertGreaterEqual(landed["after data"], least, f"kills after a client's first checked round: {landed}")

    result = fresh_pingpong(topo)
    ip = d.ip
    check_pingpong(tc, result, 4096, own_ip=(ip, ip), peer_ip=(ip, ip))
    print("a fresh ibv_rc_pingpong -c afterwards: passed", file=sys.stderr)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("uroced")
    ap.add_argument("uroce")
    ap.add_argument("churn")
    args = ap.parse_args()
    reason = harness.skip_reason("loopback", ["ibv_rc_pingpong"])
    if reason:
        print(f"SKIP: {reason}")
        return harness.SKIP
    cycles = int(os.environ.get("UROCE_KILL_CYCLES", "1000"))
    parallel = int(os.environ.get("UROCE_KILL_PARALLEL", "4"))
    seed = int(os.environ.get("UROCE_KILL_SEED", str(time.time_ns() % 1_000_000_007)))
    print(f"seed {seed} (UROCE_KILL_SEED={seed} repeats the draws), {cycles} cycles, {parallel} at once",
          file=sys.stderr)
    topo = harness.Topology("loopback", os.path.abspath(args.uroced), os.path.abspath(args.uroce))
    try:
        run(topo, os.path.abspath(args.churn), cycles, parallel, seed)
    except (Failed, AssertionError) as e:
        print(f"FAIL (seed {seed}): {e}\n{topo.daemon_logs()}", file=sys.stderr)
        return 1
    finally:
        topo.close()
    print("PASS", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
