#!/usr/bin/env python3
"""Memory registration against the data path (issue 10 item 7): how fast one
client registers, and what that does to another client's latency.

usage: sudo tools/bench/reg_bench.py [--build-dir build] [--count 10000] [--lat-iters 20000]
                                    [--trials 5] [--rounds 3] [--flood-nice 19] [--reg-flood PATH]

One uroced on the embedded loopback port. Prints:
  - the registration rate of one client registering --count distinct small
    malloc'd buffers (tests/bench/reg_flood.c), alone;
  - the 64-byte RC SEND ping-pong latency (ib_send_lat -s 64, median and
    99th percentile, half round trips) of another client pair, idle;
    --trials runs each, idle and busy alternated, and the median of each;
  - the same while the first client registers and deregisters --count MRs
    in a loop (at nice --flood-nice, 19 by default, so that on a small
    machine the figure shows what the daemon's thread does, not the CPU the
    registering process takes from the ping-pong), with the rate it reached
    meanwhile.
Prints figures; asserts nothing. Needs root (the device node) and perftest.
"""

import argparse
import os
import re
import signal
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
import uroce_harness as harness  # noqa: E402

LAT_SIZE = 64
RUN_TIMEOUT = 300
ROUND = re.compile(r"round \d+: \d+ MRs registered in [\d.]+ s: (\d+) MRs/s; deregistered: (\d+) MRs/s")


def ping_pong(topo, iters):
    port = harness.free_tcp_port()

    def argv(endpoint):
        return ["ib_send_lat", "-d", endpoint.device, "-x", str(endpoint.gid_index), "-m", str(endpoint.mtu),
                "-p", str(port), "-F", "-s", str(LAT_SIZE), "-n", str(iters)]

    result = harness.run_pair(topo, argv(topo.server), argv(topo.client) + [topo.server.tcp_host], port,
                              timeout=RUN_TIMEOUT)
    row = harness.perftest_row(result.client.output) if result.ok() else None
    if row is None:
        raise RuntimeError(result.summary())
    return row.get("t_typical[usec]"), row.get("99% percentile[usec]")


def rates(output):
    found = [(int(a), int(b)) for a, b in ROUND.findall(output)]
    if not found:
        return None
    return sum(a for a, _ in found) / len(found), sum(b for _, b in found) / len(found), len(found)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build-dir", default=os.path.join(ROOT, "build"))
    ap.add_argument("--count", type=int, default=10000, help="MRs per registration round")
    ap.add_argument("--flood-nice", type=int, default=19,
                    help="nice value of the registering client during the ping-pong: on a machine with fewer cores "
                         "than spinning processes, 0 measures the scheduler more than the daemon")
    ap.add_argument("--trials", type=int, default=5, help="idle and busy ping-pong runs, alternated")
    ap.add_argument("--rounds", type=int, default=3, help="registration rounds measured alone")
    ap.add_argument("--reg-flood", help="the reg_flood program (default: BUILD_DIR/tests/bench/reg_flood)")
    ap.add_argument("--lat-iters", type=int, default=20000, help="ping-pong iterations (ib_send_lat -n)")
    args = ap.parse_args()
    uroced = os.path.join(args.build_dir, "tools/uroced/uroced")
    uroce = os.path.join(args.build_dir, "tools/uroce/uroce")
    flood = args.reg_flood or os.path.join(args.build_dir, "tests/bench/reg_flood")
    reason = harness.skip_reason("loopback", ["ib_send_lat"])
    if reason:
        print(f"cannot run: {reason}", file=sys.stderr)
        return 1
    for path in (uroced, uroce, flood):
        if not os.path.exists(path):
            print(f"not built: {path}", file=sys.stderr)
            return 1
    topo = harness.Topology("loopback", uroced, uroce)
    try:
        d = topo.server.daemon
        alone = subprocess.run(d.exec_argv(flood, d.name, str(args.count), str(args.rounds)), capture_output=True,
                               text=True, timeout=RUN_TIMEOUT * args.rounds)
        reg_alone = rates(alone.stdout)
        if reg_alone is None:
            raise RuntimeError(f"reg_flood failed: {alone.stdout}{alone.stderr}")
        # One registering client, stopped (SIGSTOP) for the idle runs and
        # running for the busy ones, alternately: the machine's noise then
        # hits both sides alike.
        flooder = subprocess.Popen(["nice", "-n", str(args.flood_nice),
                                    *d.exec_argv(flood, d.name, str(args.count), "0")],
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        idle, busy = [], []
        try:
            for _ in range(args.trials):
                flooder.send_signal(signal.SIGSTOP)
                idle.append(ping_pong(topo, args.lat_iters))
                flooder.send_signal(signal.SIGCONT)
                busy.append(ping_pong(topo, args.lat_iters))
        finally:
            flooder.send_signal(signal.SIGCONT)
            flooder.send_signal(signal.SIGTERM)
            out, _ = flooder.communicate(timeout=30)
        reg_busy = rates(out)
    finally:
        topo.close()
    print(f"uroce registration vs ping-pong ({topo.describe()})")
    print(f"registration alone: {reg_alone[0]:.0f} MRs/s (deregistration {reg_alone[1]:.0f} MRs/s), "
          f"{args.count} distinct malloc'd buffers, mean of {reg_alone[2]} rounds")

    def summary(runs):
        medians = sorted(r[0] for r in runs)
        p99s = sorted(r[1] for r in runs)
        return (f"median {medians[len(medians) // 2]:.2f} us, p99 {p99s[len(p99s) // 2]:.2f} us "
                f"(p99 of each run: {', '.join(f'{p:.1f}' for p in p99s)})"), p99s[len(p99s) // 2]

    idle_text, idle_p99 = summary(idle)
    busy_text, busy_p99 = summary(busy)
    print(f"ping-pong {LAT_SIZE} B idle ({args.trials} runs of {args.lat_iters}): {idle_text}")
    print(f"ping-pong {LAT_SIZE} B during registration (registering client at nice {args.flood_nice}): {busy_text}")
    print(f"p99 during registration / idle: x{busy_p99 / idle_p99:.2f}")
    if reg_busy:
        print(f"registration meanwhile: {reg_busy[0]:.0f} MRs/s over {reg_busy[2]} whole rounds (while running)")
    else:
        print("registration meanwhile: no whole round of "
              f"{args.count} MRs finished during the ping-pong")
    return 0


if __name__ == "__main__":
    sys.exit(main())
