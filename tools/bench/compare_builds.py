#!/usr/bin/env python3
"""Two (or more) builds of uroce side by side: the perftest figures of one
loopback uroced per build, in alternating rounds, so that a change's effect
on the data path can be told from the noise of a shared machine.

usage: sudo tools/bench/compare_builds.py --side old=/path/to/old/build --side new=build
                                          [--daemon-arg new=--realtime-priority=0 ...]
                                          [--rounds 5] [--seconds 2] [--lat-iters 10000] [--json FILE]
                                          [--only FIGURE ...] [--pin]

Each side is a build directory (tools/uroced/uroced and tools/uroce/uroce
in it); its daemon runs on the embedded loopback port and its programs run
through its own `uroce exec`, so each side uses its own provider. The
figures: ib_write_bw -s 64 (message rate), ib_write_bw, ib_read_bw and
ib_send_bw -s 65536 (bandwidth, -D SECONDS) and ib_write_lat -s 2 (median,
"t_typical", and 99th percentile, -n LAT_ITERS). Every round measures every
figure on every side, the sides in a rotated order, so the machine's drift
falls on all alike. Prints each round, then per figure the median of each
side and its ratio to the first side's, with the load average at the start
and the end. With --pin every daemon runs on the last processor and the
bandwidth programs on the first, so that the figures measure the daemon
on a processor of its own (latency programs stay unpinned: two programs
spinning on one processor would measure the scheduler's time slice).
Needs root (the device node); the daemons and programs it
starts are gone when it ends. The build directories may be of different
commits: the harness of this tree starts both (uroced --port loopback --ip
--name --state-dir, uroce status --wait, uroce exec).
"""

import argparse
import json
import os
import re
import statistics
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
import uroce_harness as harness  # noqa: E402

RUN_TIMEOUT = 120
# (figure, tool, message size, the perftest column, what it measures)
FIGURES = [
    ("WRITE 64 B rate", "ib_write_bw", 64, "MsgRate[Mpps]", "Mpps"),
    ("WRITE 64 KiB bw", "ib_write_bw", 65536, "BW average", "MB/s"),
    ("READ 64 KiB bw", "ib_read_bw", 65536, "BW average", "MB/s"),
    ("SEND 64 KiB bw", "ib_send_bw", 65536, "BW average", "MB/s"),
    ("WRITE 2 B lat median", "ib_write_lat", 2, "t_typical[usec]", "us"),
    ("WRITE 2 B lat p99", "ib_write_lat", 2, "99% percentile[usec]", "us"),
]
HIGHER_IS_BETTER = {"Mpps": True, "MB/s": True, "us": False}


def perftest(daemon, tool, size, extra, program_cpu):
    """One perftest run on `daemon`: its result row {column: value}."""
    topo = harness.LoopbackDaemon(daemon)
    port = harness.free_tcp_port()
    pin = [] if program_cpu is None or tool.endswith("_lat") else ["taskset", "-c", str(program_cpu)]

    def argv(e):
        return pin + [tool, "-d", e.device, "-x", str(e.gid_index), "-m", str(e.mtu), "-p", str(port), "-F", "-s",
                str(size), *extra]

    result = harness.run_pair(topo, argv(topo.server), argv(topo.client) + ["127.0.0.1"], port, timeout=RUN_TIMEOUT)
    # perftest prints "-nan" for a standard deviation it could not compute;
    # the columns this script reads are numbers all the same.
    output = re.sub(r"-?nan\b", "0", result.client.output)
    row = harness.perftest_row(output) if result.ok() else None
    if row is None:
        raise RuntimeError(result.summary() + "\n" + result.describe())
    return row


def column(row, name):
    return next(v for k, v in row.items() if k.startswith(name))


def one_round(daemon, seconds, lat_iters, chosen, program_cpu):
    """Every chosen figure once on `daemon`; the latency run gives two."""
    figures = {}
    runs = {}
    for figure, tool, size, col, _ in chosen:
        key = (tool, size)
        if key not in runs:
            extra = ["-n", str(lat_iters)] if tool.endswith("_lat") else ["-D", str(seconds)]
            runs[key] = perftest(daemon, tool, size, extra, program_cpu)
        figures[figure] = column(runs[key], col)
    return figures


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--side", action="append", required=True, metavar="LABEL=BUILD_DIR",
                    help="a build to measure (two or more; the first is the reference of the ratios)")
    ap.add_argument("--daemon-arg", action="append", default=[], metavar="LABEL=ARG",
                    help="an extra uroced argument for one side")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seconds", type=int, default=2)
    ap.add_argument("--lat-iters", type=int, default=10000)
    ap.add_argument("--json", help="write every round's figures here")
    ap.add_argument("--only", action="append", default=[], metavar="FIGURE",
                    help="measure only the figures whose name starts with this (e.g. 'WRITE 64 B'); repeatable")
    ap.add_argument("--pin", action="store_true",
                    help="daemons on the last processor, bandwidth programs on the first (needs 2 or more)")
    args = ap.parse_args()
    chosen = [f for f in FIGURES if not args.only or any(f[0].startswith(o) for o in args.only)]
    if not chosen:
        raise SystemExit(f"--only matches none of: {', '.join(f[0] for f in FIGURES)}")
    if os.geteuid() != 0:
        print("needs root (the device node)")
        return 77
    missing = harness.missing_tools(["ib_write_bw", "ib_read_bw", "ib_send_bw", "ib_write_lat"])
    if missing:
        print(f"needs perftest ({', '.join(missing)})")
        return 77
    sides, extra = harness.build_sides(args.side, args.daemon_arg, minimum=2)
    load_before = os.getloadavg()
    daemons = {}
    rounds = {label: [] for label, _ in sides}
    try:
        for i, (label, build) in enumerate(sides):
            daemons[label] = harness.Daemon(os.path.join(build, "tools/uroced/uroced"),
                                            os.path.join(build, "tools/uroce/uroce"), name=f"uroce_cmp{i}",
                                            ip=f"192.0.2.{31 + i}", extra=extra[label])
        program_cpu = None
        if args.pin:
            cpus = sorted(os.sched_getaffinity(0))
            if len(cpus) < 2:
                raise SystemExit("--pin needs two or more processors")
            program_cpu = cpus[0]
            for d in daemons.values():
                d.pin_to(cpus[-1])
        labels = [label for label, _ in sides]
        for r in range(args.rounds):
            order = labels[r % len(labels):] + labels[:r % len(labels)]
            for label in order:
                rounds[label].append(one_round(daemons[label], args.seconds, args.lat_iters, chosen, program_cpu))
            print(f"round {r + 1}: " + "; ".join(
                f"{label} " + ", ".join(f"{v:.4g}" for v in rounds[label][-1].values()) for label in labels),
                  flush=True)
    finally:
        for d in daemons.values():
            d.close()
    load_after = os.getloadavg()
    ref = sides[0][0]
    print(f"\nmedians of {args.rounds} rounds (ratio: side / {ref}; "
          f"higher is better for Mpps and MB/s, lower for us)")
    for figure, _, _, _, unit in chosen:
        meds = {label: statistics.median(rs[figure] for rs in rounds[label]) for label in rounds}
        cells = "  ".join(f"{label} {meds[label]:10.4g}" +
                          ("" if label == ref else f" ({meds[label] / meds[ref]:.3f})") for label in meds)
        print(f"  {figure:22s} {unit:5s} {cells}")
    print(f"load average: {load_before[0]:.2f} {load_before[1]:.2f} {load_before[2]:.2f} at the start, "
          f"{load_after[0]:.2f} {load_after[1]:.2f} {load_after[2]:.2f} at the end")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"sides": dict(sides), "daemon_args": extra, "rounds": rounds,
                       "load": {"start": load_before, "end": load_after}}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
