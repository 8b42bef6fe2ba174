#!/usr/bin/env python3
"""uroce when busy threads outnumber CPUs (issue 16, "scarce cores"): the
same perftest runs with the daemons' loop thread SCHED_OTHER and SCHED_FIFO
(`uroced --realtime-priority`), on a quiet machine, beside CPU hogs, and
with everything on one CPU.

usage: sudo tools/bench/scarce_cores.py [--build-dir build] [--topology loopback,veth]
                                        [--contention quiet,hogs,one-cpu] [--hogs 2]
                                        [--lat-iters 1000] [--seconds 2] [--json FILE]

Contention:
  quiet    nothing else started;
  hogs     --hogs busy loops (SCHED_OTHER, nice 0) run beside the programs
           and the daemons, so runnable threads outnumber the CPUs as on a
           CI runner where other tests run;
  one-cpu  the daemons and the programs all pinned to one CPU (taskset 0),
           no hog: two polling programs and one or two daemons share it.

For each cell: ib_write_lat and ib_send_lat at 2 B (median and 99th
percentile, half a round trip as perftest reports it) and ib_write_bw at
64 KiB (MB/s). Each topology is started afresh for each schedule and
contention (the daemons inherit the CPU set). Prints one table and, per
contention, the ratio SCHED_FIFO / SCHED_OTHER of each figure (below 1 is
better for latency, above 1 for bandwidth). The machine's load average at
the start is printed: these figures only mean something beside it. Needs
root (namespaces, device nodes, SCHED_FIFO); everything it starts is
stopped by PID when it ends.
"""

import argparse
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import uroce_harness as harness  # noqa: E402
from roce_bench import bandwidth, latency  # noqa: E402

SCHEDULES = {"SCHED_OTHER": ["--realtime-priority=0"], "SCHED_FIFO": ["--realtime-priority=1"]}
CONTENTIONS = ["quiet", "hogs", "one-cpu"]
BW_SIZE = 65536
FIGURES = [("WRITE lat 2 B", "us"), ("WRITE lat 2 B p99", "us"), ("SEND lat 2 B", "us"),
           ("SEND lat 2 B p99", "us"), ("WRITE bw 64 KiB", "MB/s")]


class Hogs:
    """Busy loops that never block, stopped by PID."""

    def __init__(self, count):
        self.procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]

    def close(self):
        for p in self.procs:
            p.kill()
            p.wait()


def measure_cell(kind, schedule, contention, args, binaries):
    uroced, uroce = binaries
    all_cpus = os.sched_getaffinity(0)
    hogs = None
    if contention == "one-cpu":
        os.sched_setaffinity(0, {min(all_cpus)})  # inherited by the daemons and the programs
    topo = None
    cell = {}
    try:
        topo = harness.Topology(kind, uroced, uroce, daemon_args=SCHEDULES[schedule])
        if contention == "hogs":
            hogs = Hogs(args.hogs)
        for verb, tool in (("WRITE", "ib_write_lat"), ("SEND", "ib_send_lat")):
            lat = latency(topo, tool, args.lat_iters)
            cell[f"{verb} lat 2 B"] = lat.get("us")
            cell[f"{verb} lat 2 B p99"] = lat.get("p99_us")
            if "error" in lat:
                cell[f"{verb} error"] = lat["error"]
        bw = bandwidth(topo, "ib_write_bw", BW_SIZE, args.seconds, 1)
        cell["WRITE bw 64 KiB"] = bw.get("MB/s")
        if "error" in bw:
            cell["WRITE bw error"] = bw["error"]
    finally:
        if hogs:
            hogs.close()
        if topo:
            topo.close()
        os.sched_setaffinity(0, all_cpus)
    print(f"  {kind} {contention} {schedule}: {cell}", file=sys.stderr)
    return cell


def fmt(value, unit):
    if value is None:
        return "failed"
    return f"{value:.1f} {unit}"


def table(results, load):
    out = [f"uroce under scarce cores (perftest; latency = median, half a round trip); load average "
           f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f} at the start, {os.cpu_count()} CPUs", ""]
    cols = [(k, c, s) for k in results for c in results[k] for s in results[k][c]]
    width = 16
    out.append(f"{'':22}" + "".join(f"{k[:6] + ' ' + c:>{width}}" for k, c, _ in cols))
    out.append(f"{'':22}" + "".join(f"{s:>{width}}" for _, _, s in cols))
    for name, unit in FIGURES:
        out.append(f"{name:22}" + "".join(f"{fmt(results[k][c][s].get(name), unit):>{width}}" for k, c, s in cols))
    out += ["", "SCHED_FIFO / SCHED_OTHER (same run):"]
    for k in results:
        for c in results[k]:
            cell = results[k][c]
            if set(cell) != set(SCHEDULES):
                continue
            parts = []
            for name, _unit in FIGURES:
                a, b = cell["SCHED_FIFO"].get(name), cell["SCHED_OTHER"].get(name)
                if a and b:
                    parts.append(f"{name} {a / b:.2f}x")
            out.append(f"  {k}, {c}: " + "; ".join(parts))
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build-dir", default=os.path.join(ROOT, "build"))
    ap.add_argument("--topology", default="loopback,veth", help="comma-separated: loopback, veth")
    ap.add_argument("--contention", default=",".join(CONTENTIONS), help=f"comma-separated: {', '.join(CONTENTIONS)}")
    ap.add_argument("--hogs", type=int, default=2, help="busy loops beside the runs of the hogs contention")
    ap.add_argument("--lat-iters", type=int, default=1000, help="iterations of each latency run (perftest -n)")
    ap.add_argument("--seconds", type=int, default=2, help="duration of the bandwidth run (perftest -D)")
    ap.add_argument("--json", help="also write the figures to this file")
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("scarce_cores.py needs root (namespaces, device nodes, SCHED_FIFO)")
    binaries = (os.path.join(args.build_dir, "tools", "uroced", "uroced"),
                os.path.join(args.build_dir, "tools", "uroce", "uroce"))
    harness.set_binaries(*binaries)
    load = os.getloadavg()
    results = {}
    for kind in args.topology.split(","):
        results[kind] = {}
        for contention in args.contention.split(","):
            if contention not in CONTENTIONS:
                sys.exit(f"unknown contention {contention}")
            results[kind][contention] = {s: measure_cell(kind, s, contention, args, binaries) for s in SCHEDULES}
    print(table(results, load))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"load": load, "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
