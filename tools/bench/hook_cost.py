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


def message_rate(daemon, seconds):
    topo = OneDaemon(daemon)
    port = harness.free_tcp_port()

    def argv(e):
        return ["ib_write_bw", "-d", e.device, "-x", str(e.gid_index), "-m", str(e.mtu), "-p", str(port), "-F",
                "-s", "64", "-D", str(seconds)]

    result = harness.run_pair(topo, argv(topo.server), argv(topo.client) + ["127.0.0.1"], port, timeout=RUN_TIMEOUT)
    row = harness.perftest_row(result.client.output) if result.ok() else None
    if row is None:
        raise RuntimeError(result.summary() + "\n" + result.describe())
    return row["MsgRate[Mpps]"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build-dir", default=os.path.join(ROOT, "build"))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seconds", type=int, default=3)
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
        rates = {k: [] for k in daemons}
        for r in range(args.rounds):
            for kind in (("hook", "no hook") if r % 2 == 0 else ("no hook", "hook")):
                rates[kind].append(message_rate(daemons[kind], args.seconds))
            print(f"round {r + 1}: with the hooks {rates['hook'][-1]:.4f} Mpps, without {rates['no hook'][-1]:.4f} Mpps",
                  flush=True)
        with_hook, without = statistics.median(rates["hook"]), statistics.median(rates["no hook"])
        print(f"median: with the hooks {with_hook:.4f} Mpps, without {without:.4f} Mpps, "
              f"ratio {with_hook / without:.4f} (cost {100 * (1 - with_hook / without):+.2f}%)")
    finally:
        for d in daemons.values():
            d.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
