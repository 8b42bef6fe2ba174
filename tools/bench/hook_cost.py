#!/usr/bin/env python3
"""What the fault-injection and capture hooks cost when no rule is installed
and no capture runs: the message rate of ib_write_bw -s 64 on the embedded
loopback port, with both hooks (the default) and without them (uroced
--no-fault-hook --no-capture-hook), in alternating rounds so the machine's
load falls on both alike.

usage: sudo tools/bench/hook_cost.py [--build-dir build] [--rounds 5] [--seconds 3]

Prints each round's two message rates and the ratio of the medians
(with / without); the issue's bound is a cost under 2% (ratio >= 0.98).
Needs root (the device node); the daemons and programs it starts are gone
when it ends.
"""

import argparse
import os
import statistics
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
import uroce_harness as harness  # noqa: E402

RUN_TIMEOUT = 120


class OneDaemon:
    """A loopback uroced as run_pair's topology: both programs on it."""

    def __init__(self, daemon):
        self.daemons = [daemon]
        self.server = self.client = harness.Endpoint(daemon, "127.0.0.1")

    def dead_daemons(self):
        return [d.name for d in self.daemons if not d.alive()]


def pin_daemon(daemon, cpu):
    """Every thread of the daemon on one processor, so that the program and
    the daemon stop trading places between rounds (the largest noise on a
    2-core machine)."""
    for tid in os.listdir(f"/proc/{daemon.proc.pid}/task"):
        os.sched_setaffinity(int(tid), {cpu})


def message_rate(daemon, seconds, program_cpu):
    topo = OneDaemon(daemon)
    port = harness.free_tcp_port()
    pin = [] if program_cpu is None else ["taskset", "-c", str(program_cpu)]

    def argv(e):
        return pin + ["ib_write_bw", "-d", e.device, "-x", str(e.gid_index), "-m", str(e.mtu), "-p", str(port), "-F",
                "-s", "64", "-D", str(seconds)]

    result = harness.run_pair(topo, argv(topo.server), argv(topo.client) + ["127.0.0.1"], port, timeout=RUN_TIMEOUT)
    row = harness.perftest_row(result.client.output) if result.ok() else None
    if row is None:
        raise RuntimeError(result.summary() + "\n" + result.describe())
    return row["MsgRate[Mpps]"]


def print_paired_ratios(rates):
    """The two runs of one round ran back to back, so their ratio cancels
    the machine's slow drifts; the median of those ratios, with its quartiles,
    says how far the figure can be trusted."""
    ratios = sorted(h / n for h, n in zip(rates["hook"], rates["no hook"]))
    if len(ratios) < 4:
        return
    q1, median, q3 = statistics.quantiles(ratios, n=4)
    print(f"paired: median of {len(ratios)} round ratios {median:.4f} (quartiles {q1:.4f} .. {q3:.4f})")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build-dir", default=os.path.join(ROOT, "build"))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seconds", type=int, default=3)
    ap.add_argument("--pin", action="store_true",
                    help="daemons on the last processor, programs on the first (needs 2 or more)")
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("needs root (the device node)")
        return 77
    uroced = os.path.join(args.build_dir, "tools/uroced/uroced")
    uroce = os.path.join(args.build_dir, "tools/uroce/uroce")
    daemons = {}
    try:
        daemons["hook"] = harness.Daemon(uroced, uroce, name="uroce_hk1", ip="192.0.2.11")
        daemons["no hook"] = harness.Daemon(uroced, uroce, name="uroce_hk0", ip="192.0.2.12",
                                            extra=["--no-fault-hook", "--no-capture-hook"])
        program_cpu = None
        if args.pin:
            cpus = sorted(os.sched_getaffinity(0))
            program_cpu = cpus[0]
            for d in daemons.values():
                pin_daemon(d, cpus[-1])
        rates = {k: [] for k in daemons}
        for r in range(args.rounds):
            for kind in (("hook", "no hook") if r % 2 == 0 else ("no hook", "hook")):
                rates[kind].append(message_rate(daemons[kind], args.seconds, program_cpu))
            print(f"round {r + 1}: with the hooks {rates['hook'][-1]:.4f} Mpps, without {rates['no hook'][-1]:.4f} Mpps",
                  flush=True)
        with_hook, without = statistics.median(rates["hook"]), statistics.median(rates["no hook"])
        print(f"median: with the hooks {with_hook:.4f} Mpps, without {without:.4f} Mpps, "
              f"ratio {with_hook / without:.4f} (cost {100 * (1 - with_hook / without):+.2f}%)")
        print_paired_ratios(rates)
    finally:
        for d in daemons.values():
            d.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
