#!/usr/bin/env python3
"""uroce's RDMA benchmark: perftest over the embedded loopback port and over
a veth pair between two network namespaces (one uroced on net_af_packet in
each), and the kernel's own UDP round trip on that same veth (sockperf) as
the floor.

usage: sudo tools/bench/roce_bench.py [--build-dir build] [--topology loopback,veth]
                                      [--seconds 2] [--lat-iters 10000] [--qps 1] [--json FILE]

For each of RDMA WRITE, RDMA READ and SEND: bandwidth at 64 B, 4 KiB and
64 KiB (ib_*_bw -D SECONDS) and latency at 2 B (ib_*_lat -n LAT_ITERS; the
median, "t_typical"). WRITE and SEND latencies are half a round trip, as
perftest reports them; READ latency is a whole one (request and response),
like the UDP figure (sockperf --full-rtt, median).
Prints one table, then notes where a figure looks pathological: a bandwidth
that does not grow with the message size, or a latency of a millisecond or
more (a timer tick, not a packet path). Needs root (namespaces, the device
node); the daemons, programs and namespaces it starts are gone when it ends.
"""

import argparse
import json
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
import uroce_harness as harness  # noqa: E402

VERBS = [("WRITE", "ib_write_bw", "ib_write_lat"), ("READ", "ib_read_bw", "ib_read_lat"),
         ("SEND", "ib_send_bw", "ib_send_lat")]
BW_SIZES = [64, 4096, 65536]
LAT_SIZE = 2
SOCKPERF_MSG = 14  # sockperf's smallest message
RUN_TIMEOUT = 120
TIMER_TICK_US = 1000.0  # a latency this long means something waited for a timer


def run_perftest(topo, tool, size, args):
    port = harness.free_tcp_port()

    def argv(endpoint):
        return [tool, "-d", endpoint.device, "-x", str(endpoint.gid_index), "-m", str(endpoint.mtu), "-p", str(port),
                "-F", "-s", str(size), *args]

    result = harness.run_pair(topo, argv(topo.server), argv(topo.client) + [topo.server.tcp_host], port,
                              timeout=RUN_TIMEOUT)
    row = harness.perftest_row(result.client.output) if result.ok() else None
    if row is None:
        return {"error": result.summary()}
    return row


def bandwidth(topo, tool, size, seconds, qps):
    row = run_perftest(topo, tool, size, ["-D", str(seconds), "-q", str(qps)])
    if "error" in row:
        return row
    bw = next(v for k, v in row.items() if k.startswith("BW average"))
    return {"MB/s": bw, "Mpps": row.get("MsgRate[Mpps]", 0.0)}


def latency(topo, tool, iters):
    row = run_perftest(topo, tool, LAT_SIZE, ["-n", str(iters)])
    if "error" in row:
        return row
    return {"us": row.get("t_typical[usec]"), "avg_us": row.get("t_avg[usec]"),
            "p99_us": row.get("99% percentile[usec]")}


def udp_floor(topo, seconds):
    """The kernel's UDP round trip between the two namespaces on the same
    veth (sockperf ping-pong of its smallest message, 14 B), with the daemons
    running on it."""
    port = harness.free_tcp_port()
    ns_server, ns_client = topo.net.ns
    server = subprocess.Popen(["ip", "netns", "exec", ns_server, "sockperf", "server", "-i", topo.net.ip[0], "-p",
                               str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        harness.wait_listening(port, server, proto="udp")
        r = subprocess.run(["ip", "netns", "exec", ns_client, "sockperf", "ping-pong", "-i", topo.net.ip[0], "-p",
                            str(port), "-m", str(SOCKPERF_MSG), "-t", str(seconds), "--full-rtt"],
                           capture_output=True, text=True, timeout=RUN_TIMEOUT)
    finally:
        server.kill()
        server.wait()
    median = re.search(r"percentile 50\.000 =\s*([\d.]+)", r.stdout)
    p99 = re.search(r"percentile 99\.000 =\s*([\d.]+)", r.stdout)
    if r.returncode != 0 or not (median and p99):
        return {"error": (r.stdout + r.stderr).strip()[-500:]}
    return {"rtt_us": float(median.group(1)), "p99_us": float(p99.group(1))}


def measure(kind, args, binaries):
    uroced, uroce = binaries
    topo = harness.Topology(kind, uroced, uroce)
    figures = {"topology": topo.describe()}
    try:
        for verb, bw_tool, lat_tool in VERBS:
            for size in BW_SIZES:
                figures[f"{verb} bw {size}"] = bandwidth(topo, bw_tool, size, args.seconds, args.qps)
                print(f"  {kind}: {verb} bw {size} B: {figures[f'{verb} bw {size}']}", file=sys.stderr)
            figures[f"{verb} lat {LAT_SIZE}"] = latency(topo, lat_tool, args.lat_iters)
            print(f"  {kind}: {verb} lat {LAT_SIZE} B: {figures[f'{verb} lat {LAT_SIZE}']}", file=sys.stderr)
        if kind == "veth":
            figures["udp"] = udp_floor(topo, args.seconds)
            print(f"  {kind}: kernel UDP: {figures['udp']}", file=sys.stderr)
    finally:
        topo.close()
    return figures


def cell(fig):
    if fig is None:
        return "-"
    if "error" in fig:
        return "failed"
    if "MB/s" in fig:
        return f"{fig['MB/s']:9.1f} MB/s {fig['Mpps']:6.3f} Mpps"
    if "rtt_us" in fig:
        return f"{fig['rtt_us']:8.2f} us RTT ({fig['rtt_us'] / 2:.2f} one way)"
    return f"{fig['us']:8.2f} us (p99 {fig['p99_us']:.2f})"


def table(results):
    kinds = list(results)
    headers = {"loopback": "loopback port", "veth": "veth (net_af_packet)"}
    rows = []
    for verb, _bw, _lat in VERBS:
        for size in BW_SIZES:
            rows.append((f"{verb:5} {'bandwidth':10} {size:>6} B", f"{verb} bw {size}"))
        rows.append((f"{verb:5} {'latency':10} {LAT_SIZE:>6} B", f"{verb} lat {LAT_SIZE}"))
    width = 34
    out = ["uroce benchmark (perftest; latency = median, t_typical)", "",
           f"{'':26}" + "".join(f"{headers.get(k, k):>{width}}" for k in kinds)]
    for label, key in rows:
        out.append(f"{label:26}" + "".join(f"{cell(results[k].get(key)):>{width}}" for k in kinds))
    if "veth" in results:
        out.append(f"{'UDP':5} {'kernel RTT':10} {SOCKPERF_MSG:>6} B" + "".join(
            f"{cell(results[k].get('udp')):>{width}}" for k in kinds))
    notes = []
    for k in kinds:
        for verb, _bw, _lat in VERBS:
            figs = [results[k].get(f"{verb} bw {s}") for s in BW_SIZES]
            if all(f and "MB/s" in f for f in figs) and any(b["MB/s"] <= a["MB/s"] for a, b in zip(figs, figs[1:])):
                notes.append(f"{k}: {verb} bandwidth does not grow with the message size")
            lat = results[k].get(f"{verb} lat {LAT_SIZE}")
            if lat and "us" in lat and lat["us"] >= TIMER_TICK_US:
                notes.append(f"{k}: {verb} latency {lat['us']:.0f} us looks like a timer tick")
        for key, fig in results[k].items():
            if isinstance(fig, dict) and "error" in fig:
                notes.append(f"{k}: {key} failed: {fig['error']}")
    if notes:
        out += ["", "notes:"] + [f"  - {n}" for n in notes]
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build-dir", default=os.path.join(ROOT, "build"))
    ap.add_argument("--topology", default="loopback,veth", help="comma-separated: loopback, veth")
    ap.add_argument("--seconds", type=int, default=2, help="duration of each bandwidth run (perftest -D)")
    ap.add_argument("--lat-iters", type=int, default=10000, help="iterations of each latency run (perftest -n)")
    ap.add_argument("--qps", type=int, default=1, help="QPs of each bandwidth run (perftest -q)")
    ap.add_argument("--json", help="also write the figures to this file")
    args = ap.parse_args()
    binaries = [os.path.join(args.build_dir, p) for p in ("tools/uroced/uroced", "tools/uroce/uroce")]
    missing = [p for p in binaries if not os.access(p, os.X_OK)]
    if missing:
        print(f"roce_bench: not built: {', '.join(missing)} (ninja -C {args.build_dir})", file=sys.stderr)
        return 2
    tools = [t for _v, bw, lat in VERBS for t in (bw, lat)]
    results = {}
    for kind in args.topology.split(","):
        reason = harness.skip_reason(kind, tools + (["sockperf"] if kind == "veth" else []))
        if reason:
            print(f"roce_bench: {kind}: {reason}", file=sys.stderr)
            return 2
        print(f"roce_bench: measuring over {kind}", file=sys.stderr)
        results[kind] = measure(kind, args, binaries)
    print(table(results))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
