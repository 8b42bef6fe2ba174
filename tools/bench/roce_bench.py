#!/usr/bin/env python3
"""uroce's RDMA benchmark: perftest over the embedded loopback port, over a
veth pair between two network namespaces (one uroced on net_af_packet in
each) with a 1500-byte and a 9000-byte MTU, and over net_memif (shared
memory between the two daemons), beside floors measured in the same run:
the kernel's own UDP round trip (sockperf) and TCP bandwidth (iperf3) on the
same veth, and one core's memcpy bandwidth.

usage: sudo tools/bench/roce_bench.py [--build-dir build] [--topology loopback,veth,veth-jumbo,memif]
                                      [--verbs WRITE,READ,SEND] [--seconds 2] [--lat-iters 10000] [--qps 1]
                                      [--daemon-arg=--realtime-priority=0 ...] [--json FILE]

For each verb: bandwidth at 64 B, 4 KiB and 64 KiB (ib_*_bw -D SECONDS) and
latency at 2 B (ib_*_lat -n LAT_ITERS; the median, "t_typical", and the
99th percentile). WRITE and SEND latencies are half a round trip, as
perftest reports them; READ latency is a whole one (request and response),
like the UDP figure (sockperf --full-rtt, median). On the jumbo veth the
64 KiB WRITE also runs at path MTU 1024, for the jumbo/standard ratio.
Prints one table, the ratios against the floors, then notes where a figure
looks pathological: a bandwidth that does not grow with the message size, a
latency of a millisecond or more (a timer tick, not a packet path), or a p99
above 3x its median. Needs root (namespaces, the device node); the daemons,
programs and namespaces it starts are gone when it ends.
"""

import argparse
import json
import os
import re
import subprocess
import sys
import time

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


KINDS = ["loopback", "veth", "veth-jumbo", "memif"]
WIRED = ["veth", "veth-jumbo", "memif"]  # two daemons in two namespaces, a veth between them
HEADERS = {"loopback": "loopback port", "veth": "veth 1500 (af_packet)", "veth-jumbo": "veth 9000 (af_packet)",
           "memif": "memif (shared memory)"}
STANDARD_PATH_MTU = 1024
MEMCPY_BYTES = 64 << 20  # larger than any cache here
P99_OVER_MEDIAN = 3.0  # issue 16's bound on a latency test's tail


def run_perftest(topo, tool, size, args, mtu=None):
    port = harness.free_tcp_port()

    def argv(endpoint):
        return [tool, "-d", endpoint.device, "-x", str(endpoint.gid_index), "-m", str(mtu or endpoint.mtu), "-p",
                str(port), "-F", "-s", str(size), *args]

    result = harness.run_pair(topo, argv(topo.server), argv(topo.client) + [topo.server.tcp_host], port,
                              timeout=RUN_TIMEOUT)
    row = harness.perftest_row(result.client.output) if result.ok() else None
    if row is None:
        return {"error": result.summary()}
    return row


def bandwidth(topo, tool, size, seconds, qps, mtu=None):
    row = run_perftest(topo, tool, size, ["-D", str(seconds), "-q", str(qps)], mtu)
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


def tcp_floor(topo, seconds):
    """The host's TCP bandwidth between the two namespaces over the same veth
    (iperf3, one stream), with the daemons running on it."""
    port = harness.free_tcp_port()
    ns_server, ns_client = topo.net.ns
    server = subprocess.Popen(["ip", "netns", "exec", ns_server, "iperf3", "-s", "-1", "-B", topo.net.ip[0], "-p",
                               str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        harness.wait_listening(port, server)
        r = subprocess.run(["ip", "netns", "exec", ns_client, "iperf3", "-c", topo.net.ip[0], "-p", str(port), "-t",
                            str(seconds), "-J"], capture_output=True, text=True, timeout=RUN_TIMEOUT)
    finally:
        server.kill()
        server.wait()
    try:
        bps = json.loads(r.stdout)["end"]["sum_received"]["bits_per_second"]
    except (ValueError, KeyError):
        return {"error": (r.stdout + r.stderr).strip()[-500:]}
    return {"MB/s": bps / 8 / 1e6, "Mpps": 0.0}


def memcpy_floor(seconds):
    """One core's memcpy bandwidth on buffers larger than the caches
    (bytearray slice assignment is one memcpy)."""
    src = bytearray(os.urandom(1 << 20)) * (MEMCPY_BYTES >> 20)
    dst = bytearray(MEMCPY_BYTES)
    copies, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        dst[:] = src
        copies += 1
    return {"MB/s": copies * MEMCPY_BYTES / (time.perf_counter() - start) / 1e6, "Mpps": 0.0}


def measure(kind, args, binaries):
    uroced, uroce = binaries
    topo = harness.Topology(kind, uroced, uroce, daemon_args=args.daemon_arg)
    figures = {"topology": topo.describe()}
    try:
        for verb, bw_tool, lat_tool in VERBS:
            if verb not in args.verbs:
                continue
            for size in BW_SIZES:
                figures[f"{verb} bw {size}"] = bandwidth(topo, bw_tool, size, args.seconds, args.qps)
                print(f"  {kind}: {verb} bw {size} B: {figures[f'{verb} bw {size}']}", file=sys.stderr)
            figures[f"{verb} lat {LAT_SIZE}"] = latency(topo, lat_tool, args.lat_iters)
            print(f"  {kind}: {verb} lat {LAT_SIZE} B: {figures[f'{verb} lat {LAT_SIZE}']}", file=sys.stderr)
        if kind == "veth-jumbo" and "WRITE" in args.verbs:
            key = f"WRITE bw {BW_SIZES[-1]} mtu {STANDARD_PATH_MTU}"
            figures[key] = bandwidth(topo, "ib_write_bw", BW_SIZES[-1], args.seconds, args.qps, STANDARD_PATH_MTU)
            print(f"  {kind}: {key}: {figures[key]}", file=sys.stderr)
        if kind in ("veth", "veth-jumbo"):
            figures["udp"] = udp_floor(topo, args.seconds)
            print(f"  {kind}: kernel UDP: {figures['udp']}", file=sys.stderr)
            figures["tcp"] = tcp_floor(topo, args.seconds)
            print(f"  {kind}: kernel TCP: {figures['tcp']}", file=sys.stderr)
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


def ratio(a, b, key_a, key_b):
    if not (a and b and key_a in a and key_b in b) or not b[key_b]:
        return None
    return a[key_a] / b[key_b]


def ratios(results, memcpy):
    """Each topology's headline figures against the floors of the same run."""
    tcp = results.get("veth", {}).get("tcp")
    udp = results.get("veth", {}).get("udp")
    big = f"WRITE bw {BW_SIZES[-1]}"
    out = []
    for k, figs in results.items():
        parts = []
        r = ratio(figs.get(big), memcpy, "MB/s", "MB/s")
        if r is not None:
            parts.append(f"64 KiB WRITE {r:.2f}x one core's memcpy")
        r = ratio(figs.get(big), tcp, "MB/s", "MB/s")
        if r is not None and k != "loopback":
            parts.append(f"{r:.2f}x host TCP on the 1500 veth")
        r = ratio(figs.get(big), figs.get("tcp"), "MB/s", "MB/s")
        if r is not None and k == "veth-jumbo":
            parts.append(f"{r:.2f}x host TCP on this veth")
        r = ratio(figs.get(big), figs.get(f"{big} mtu {STANDARD_PATH_MTU}"), "MB/s", "MB/s")
        if r is not None:
            parts.append(f"path MTU 4096 {r:.2f}x path MTU {STANDARD_PATH_MTU}")
        lat = figs.get(f"WRITE lat {LAT_SIZE}")
        if lat and "us" in lat and udp and "rtt_us" in udp and k != "loopback":
            parts.append(f"2 B WRITE latency {lat['us'] / (udp['rtt_us'] / 2):.2f}x the kernel's UDP one-way")
        small = figs.get(f"WRITE bw {BW_SIZES[0]}")
        if small and "Mpps" in small:
            parts.append(f"64 B WRITE {small['Mpps']:.2f} Mpps")
        if parts:
            out.append(f"  {HEADERS.get(k, k)}: " + "; ".join(parts))
    return out


def table(results, memcpy=None, load=None):
    kinds = list(results)
    rows = []
    for verb, _bw, _lat in VERBS:
        for size in BW_SIZES:
            rows.append((f"{verb:5} {'bandwidth':10} {size:>6} B", f"{verb} bw {size}"))
        rows.append((f"{verb:5} {'latency':10} {LAT_SIZE:>6} B", f"{verb} lat {LAT_SIZE}"))
    rows.append((f"WRITE {'bw mtu1024':10} {BW_SIZES[-1]:>6} B", f"WRITE bw {BW_SIZES[-1]} mtu {STANDARD_PATH_MTU}"))
    rows = [r for r in rows if any(r[1] in results[k] for k in kinds)]
    width = 34
    out = ["uroce benchmark (perftest; latency = median, t_typical)"
           + (f"; load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} at the start" if load else ""), "",
           f"{'':26}" + "".join(f"{HEADERS.get(k, k):>{width}}" for k in kinds)]
    for label, key in rows:
        out.append(f"{label:26}" + "".join(f"{cell(results[k].get(key)):>{width}}" for k in kinds))
    if any(k in results for k in ("veth", "veth-jumbo")):
        out.append(f"{'UDP':5} {'kernel RTT':10} {SOCKPERF_MSG:>6} B" + "".join(
            f"{cell(results[k].get('udp')):>{width}}" for k in kinds))
        out.append(f"{'TCP':5} {'kernel bw':10} {'iperf3':>8}" + "".join(
            f"{cell(results[k].get('tcp')):>{width}}" for k in kinds))
    if memcpy:
        out.append(f"{'memcpy':6} {'one core':9} {MEMCPY_BYTES >> 20:>4} MiB {cell(memcpy):>{width}}")
    ratio_lines = ratios(results, memcpy)
    if ratio_lines:
        out += ["", "ratios (same run):"] + ratio_lines
    notes = []
    for k in kinds:
        for verb, _bw, _lat in VERBS:
            figs = [results[k].get(f"{verb} bw {s}") for s in BW_SIZES]
            if all(f and "MB/s" in f for f in figs) and any(b["MB/s"] <= a["MB/s"] for a, b in zip(figs, figs[1:])):
                notes.append(f"{k}: {verb} bandwidth does not grow with the message size")
            lat = results[k].get(f"{verb} lat {LAT_SIZE}")
            if lat and "us" in lat and lat["us"] >= TIMER_TICK_US:
                notes.append(f"{k}: {verb} latency {lat['us']:.0f} us looks like a timer tick")
            if lat and lat.get("us") and lat.get("p99_us") and lat["p99_us"] > P99_OVER_MEDIAN * lat["us"]:
                notes.append(f"{k}: {verb} latency p99 {lat['p99_us']:.1f} us is {lat['p99_us'] / lat['us']:.1f}x "
                             f"its median")
        for key, fig in results[k].items():
            if isinstance(fig, dict) and "error" in fig:
                notes.append(f"{k}: {key} failed: {fig['error']}")
    if notes:
        out += ["", "notes:"] + [f"  - {n}" for n in notes]
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build-dir", default=os.path.join(ROOT, "build"))
    ap.add_argument("--topology", default=",".join(KINDS), help=f"comma-separated: {', '.join(KINDS)}")
    ap.add_argument("--verbs", default="WRITE,READ,SEND", help="comma-separated: WRITE, READ, SEND")
    ap.add_argument("--daemon-arg", action="append", default=[],
                    help="one more uroced flag for every daemon (repeatable): --daemon-arg=--realtime-priority=0")
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
    args.verbs = args.verbs.split(",")
    tools = [t for _v, bw, lat in VERBS for t in (bw, lat)]
    results = {}
    load = os.getloadavg()
    memcpy = memcpy_floor(args.seconds)
    print(f"roce_bench: memcpy {memcpy['MB/s']:.0f} MB/s", file=sys.stderr)
    for kind in args.topology.split(","):
        if kind not in KINDS:
            print(f"roce_bench: unknown topology {kind} (one of {', '.join(KINDS)})", file=sys.stderr)
            return 2
        floors = ["sockperf", "iperf3"] if kind in ("veth", "veth-jumbo") else []
        reason = harness.skip_reason(kind, tools + floors)
        if reason:
            print(f"roce_bench: {kind}: {reason}", file=sys.stderr)
            return 2
        print(f"roce_bench: measuring over {kind}", file=sys.stderr)
        results[kind] = measure(kind, args, binaries)
    print(table(results, memcpy, load))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"load": load, "memcpy": memcpy, **results}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
