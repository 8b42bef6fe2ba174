#!/usr/bin/env python3
"""Two devices on one host in one uroced against the same two devices in two
uroced (issue 16, "scarce cores"; docs/daemon.md "Several devices in one
daemon"): ib_write_lat 2 B (median, 99th percentile), ib_write_bw 64 B and
64 KiB, with everything on one CPU and on two (the daemons and the programs
inherit this script's CPU set).

usage: sudo tools/bench/one_daemon.py [--build-dir build] [--wire veth] [--cpus 0 0,1] [--rounds 3]
                                      [--lat-iters 2000] [--seconds 2]

The two shapes alternate within each round (two daemons first in odd
rounds, one daemon first in even ones) so a change in the machine's load
falls on both; each shape starts afresh for each cell. Prints per CPU set
the median over the rounds of each figure and the ratio one daemon / two
daemons (below 1 is better for latency, above 1 for bandwidth), and the
load average at the start and the end.
"""

import argparse
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import uroce_harness as harness  # noqa: E402
from roce_bench import bandwidth, latency  # noqa: E402

FIGURES = ["WRITE lat 2 B", "WRITE lat 2 B p99", "WRITE bw 64 B", "WRITE bw 64 KiB"]
LOWER_IS_BETTER = {"WRITE lat 2 B", "WRITE lat 2 B p99"}


def measure(kind, cpus, args, binaries):
    all_cpus = os.sched_getaffinity(0)
    os.sched_setaffinity(0, cpus)
    topo = None
    cell = {}
    try:
        topo = harness.Topology(kind, *binaries)
        lat = latency(topo, "ib_write_lat", args.lat_iters)
        cell["WRITE lat 2 B"], cell["WRITE lat 2 B p99"] = lat.get("us"), lat.get("p99_us")
        for size, name in ((64, "WRITE bw 64 B"), (65536, "WRITE bw 64 KiB")):
            cell[name] = bandwidth(topo, "ib_write_bw", size, args.seconds, 1).get("MB/s")
    finally:
        if topo:
            topo.close()
        os.sched_setaffinity(0, all_cpus)
    print(f"  {kind} cpus {sorted(cpus)}: {cell}", file=sys.stderr)
    return cell


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build-dir", default=os.path.join(ROOT, "build"))
    ap.add_argument("--wire", default="veth", choices=["veth", "memif"])
    ap.add_argument("--cpus", nargs="+", default=["0", "0,1"])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--lat-iters", type=int, default=2000)
    ap.add_argument("--seconds", type=int, default=2)
    args = ap.parse_args()
    binaries = (os.path.join(args.build_dir, "tools/uroced/uroced"), os.path.join(args.build_dir, "tools/uroce/uroce"))
    harness.set_binaries(*binaries)
    shapes = {"two daemons": args.wire, "one daemon": f"{args.wire}-one-daemon"}
    load_start = os.getloadavg()
    results = {}  # (cpus, shape) -> [cell, ...]
    for r in range(args.rounds):
        for cpus_text in args.cpus:
            cpus = {int(c) for c in cpus_text.split(",")}
            order = list(shapes) if r % 2 == 0 else list(reversed(shapes))
            for shape in order:
                results.setdefault((cpus_text, shape), []).append(measure(shapes[shape], cpus, args, binaries))
    load_end = os.getloadavg()
    print(f"load average at start {load_start[0]:.2f} {load_start[1]:.2f} {load_start[2]:.2f}, "
          f"at end {load_end[0]:.2f} {load_end[1]:.2f} {load_end[2]:.2f}; {args.rounds} rounds, medians")
    print(f"{'cpus':6} {'figure':20} {'two daemons':>12} {'one daemon':>12} {'one/two':>8}")
    for cpus_text in args.cpus:
        for fig in FIGURES:
            med = {}
            for shape in shapes:
                med[shape] = harness.median_of(results[(cpus_text, shape)], fig)
            two, one = med["two daemons"], med["one daemon"]
            ratio = f"{one / two:.2f}" if one and two else "-"
            print(f"{cpus_text:6} {fig:20} {two if two is not None else 'failed':>12} "
                  f"{one if one is not None else 'failed':>12} {ratio:>8}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
