#!/usr/bin/env python3
"""A memif port's rx wake-up rung by the sending uroced against its naps
(issue 16, "scarce cores"; docs/wires.md "Rx wake-up by the sending
daemon"): 2-byte ib_write_lat (median, p99) between two uroced joined by
net_memif, each variant of the ports' devargs in turn, with everything on
one CPU and on two (the daemons and the programs inherit this script's CPU
set), beside the kernel's UDP one-way latency between the same two
namespaces (sockperf ping-pong on the veth, half its round trip) measured
on the same CPUs in the same round.

usage: sudo tools/bench/memif_wake.py [--build-dir build] [--cpus 0 0,1] [--rounds 3] [--lat-iters 2000]
                                      [--variant wake=uroce-wake=yes --variant naps=uroce-wake=no]
                                      [--daemon-arg=--stall-ms=1 ...]

--variant LABEL=DEVARGS: devargs added to both memif ports (empty for the
daemon's default). The variants alternate within each round (rotated by
one each round), so a change in the machine's load falls on all alike; each
starts afresh for each cell. Per cell it prints the figures and each
daemon's sleeps over the latency run: how many, how many an fd woke, and
how many ran to their timeout (`uroce stats` group idle), then per CPU set
the median over the rounds of each figure, its ratio to the first variant
and to the UDP one-way latency (issue 16's target: WRITE <= 0.6x), and the
load average at the start and the end.
"""

import argparse
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import uroce_harness as harness  # noqa: E402
from roce_bench import latency, udp_floor  # noqa: E402

FIGURES = ["median us", "p99 us", "p99/median", "x UDP 1-way", "sleeps/rt", "timeouts/rt"]
UDP_SECONDS = 2


def variants_of(values):
    out = []
    for v in values:
        label, sep, devargs = v.partition("=")
        if not sep or not label or label in (l for l, _ in out):
            raise SystemExit(f"--variant wants distinct LABEL=DEVARGS, not {v!r}")
        out.append((label, f",{devargs}" if devargs else ""))
    return out


def measure(devargs, cpus, args, binaries):
    all_cpus = os.sched_getaffinity(0)
    os.sched_setaffinity(0, cpus)
    topo = None
    try:
        topo = harness.Topology("memif", *binaries, daemon_args=args.daemon_arg, memif_devargs=devargs)
        lat = latency(topo, "ib_write_lat", args.lat_iters)
        udp = udp_floor(topo, UDP_SECONDS)
    finally:
        if topo:
            topo.close()
        os.sched_setaffinity(0, all_cpus)
    cell = {}
    if lat.get("us") and lat.get("p99_us"):
        cell["median us"], cell["p99 us"] = lat["us"], lat["p99_us"]
        cell["p99/median"] = lat["p99_us"] / lat["us"]
        if udp.get("rtt_us"):
            cell["x UDP 1-way"] = lat["us"] / (udp["rtt_us"] / 2)
        idle = lat.get("idle", [])
        sleeps = sum(d.get("sleeps", 0) for d in idle)
        woken = sum(d.get("woken_by_fd", 0) for d in idle)
        cell["sleeps/rt"] = sleeps / args.lat_iters
        cell["timeouts/rt"] = (sleeps - woken) / args.lat_iters
        cell["per daemon sleeps, woken by fd"] = [(d.get("sleeps", 0), d.get("woken_by_fd", 0)) for d in idle]
    else:
        cell["error"] = lat.get("error", "no figures")
    cell["udp rtt us"] = udp.get("rtt_us")
    return cell


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build-dir", default=os.path.join(ROOT, "build"))
    ap.add_argument("--cpus", nargs="+", default=["0", "0,1"])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--lat-iters", type=int, default=2000)
    ap.add_argument("--variant", action="append", default=[])
    ap.add_argument("--daemon-arg", action="append", default=[])
    args = ap.parse_args()
    variants = variants_of(args.variant or ["wake=uroce-wake=yes", "naps=uroce-wake=no"])
    binaries = (os.path.join(args.build_dir, "tools/uroced/uroced"), os.path.join(args.build_dir, "tools/uroce/uroce"))
    harness.set_binaries(*binaries)
    load_start = os.getloadavg()
    results = {}  # (cpus, label) -> [cell, ...]
    for r in range(args.rounds):
        for cpus_text in args.cpus:
            cpus = {int(c) for c in cpus_text.split(",")}
            shift = r % len(variants)
            for label, devargs in variants[shift:] + variants[:shift]:
                cell = measure(devargs, cpus, args, binaries)
                print(f"round {r + 1} cpus {cpus_text} {label}: {cell} (load {os.getloadavg()[0]:.2f})", flush=True)
                results.setdefault((cpus_text, label), []).append(cell)
    load_end = os.getloadavg()
    print(f"load average at start {load_start[0]:.2f} {load_start[1]:.2f} {load_start[2]:.2f}, "
          f"at end {load_end[0]:.2f} {load_end[1]:.2f} {load_end[2]:.2f}; {args.rounds} rounds, "
          f"ib_write_lat -s 2 -n {args.lat_iters}, medians over the rounds; sleeps and timeouts: both daemons' "
          f"together, per round trip (rt)")
    labels = [label for label, _ in variants]
    print(f"{'cpus':6} {'figure':12} " + " ".join(f"{label:>12}" for label in labels) +
          " " + " ".join(f"{label + '/' + labels[0]:>14}" for label in labels[1:]))
    for cpus_text in args.cpus:
        for fig in FIGURES:
            med = {}
            for label in labels:
                med[label] = harness.median_of(results[(cpus_text, label)], fig)
            cells = " ".join(f"{med[label]:12.2f}" if med[label] is not None else f"{'failed':>12}" for label in labels)
            first = med[labels[0]]
            ratios = " ".join(f"{med[label] / first:14.2f}" if med[label] and first else f"{'-':>14}"
                              for label in labels[1:])
            print(f"{cpus_text:6} {fig:12} {cells} {ratios}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
