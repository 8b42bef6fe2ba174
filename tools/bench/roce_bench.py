#!/usr/bin/env python3
"""uroce's RDMA benchmark: perftest over the embedded loopback port, over a
veth pair between two network namespaces (one uroced on net_af_packet in
each) with a 1500-byte and a 9000-byte MTU, and over net_memif (shared
memory between the two daemons), beside floors measured in the same run:
one core's memcpy bandwidth, and on the same veth the host's TCP bandwidth
(iperf3), the kernel's UDP round trip (sockperf ping-pong) and its UDP
message rate (iperf3 -u).

usage: sudo tools/bench/roce_bench.py [--build-dir build] [--topology loopback,veth,veth-jumbo,memif]
                                      [--topology veth-one-daemon,memif-one-daemon (the same wires, one uroced
                                       serving both ends; its veth gets its own floors)]
                                      [--verbs WRITE,READ,SEND] [--seconds 2] [--lat-iters 10000]
                                      [--qps 1,8] [--no-bandwidth] [--program-priority N]
                                      [--daemon-arg=--realtime-priority=0 ...] [--json FILE]

For each verb: bandwidth at 64 B, 4 KiB and 64 KiB (ib_*_bw -D SECONDS),
once for each --qps value (perftest -q; default 1 and 8), and latency at
2 B (ib_*_lat -n LAT_ITERS: median ("t_typical"), p99, p99.9 and the
maximum). WRITE and SEND latencies are half a round trip, as perftest
reports them; READ latency is a whole one (request and response). On the
jumbo veth the 64 KiB WRITE also runs at path MTU 1024.

Message rate per core: the daemons' CPU time (every thread of every uroced
of the topology, from /proc/PID/task/TID/schedstat) over the whole
bandwidth run, against the messages it moved (perftest's Mpps times
SECONDS): Mpps per core-second of daemon CPU. Perftest's setup and margins
count against it, so it errs low.

Prints one table: a row per figure, columns -q 1, -q 8, message rate per
daemon core, the latency tail (p99 with its ratio to the median, p99.9,
max), the ratio against this run's floor, and issue 16's target where the
figure maps to one (the bound, this run's ratio, ok or MISS). Notes follow
for a bandwidth that does not grow with the message size, a latency of a
millisecond or more, a p99 above 3x its median, the daemons' wait for a
CPU during a latency run (schedstat's run delay) and the loop stalls they
counted in it that were not a sleep the idle policy asked for (give
--daemon-arg=--stall-ms=1 to see short ones), and failures. --program-priority N runs perftest under `chrt -f N`
(SCHED_FIFO; give the daemons a higher --realtime-priority, or spinning
programs keep them off the CPUs). Needs root (namespaces, the device node);
the daemons, programs and namespaces it starts are gone when it ends.
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
UDP_RATE_MSG = 64  # iperf3 -u datagram payload, the size of the 64 B message-rate rows
RUN_TIMEOUT = 120
TIMER_TICK_US = 1000.0  # a latency this long means something waited for a timer


DEFAULT_KINDS = ["loopback", "veth", "veth-jumbo", "memif"]
# The one-host testbed's two devices served by one uroced (docs/daemon.md
# "Several devices in one daemon"): what issue 16's "two daemons, one host"
# rows become when one daemon thread carries both ends.
KINDS = DEFAULT_KINDS + ["veth-one-daemon", "memif-one-daemon"]
VETHS = ["veth", "veth-jumbo", "veth-one-daemon"]  # the kernel's floors are measured on these
HEADERS = {"loopback": "loopback", "veth": "veth 1500", "veth-jumbo": "veth 9000", "memif": "memif",
           "veth-one-daemon": "veth 1500, one uroced", "memif-one-daemon": "memif, one uroced"}
STANDARD_PATH_MTU = 1024
MEMCPY_BYTES = 64 << 20  # larger than any cache here
P99_OVER_MEDIAN = 3.0  # issue 16's bound on a latency test's tail
IDLE_COUNTERS = ("sleeps", "woken_by_fd", "slept_ns")
NAPS_WORTH_A_NOTE = 0.1  # share of a latency run's sleeps that ran to their timeout (a nap, not the 10 ms net)
WAIT_WORTH_A_NOTE_S = 0.001  # a daemon's wait for a CPU, summed over a latency run, that could make a tail
STALL_COUNTERS = ("stalls", "longest_ns", "cause_cpu_wait", "cause_on_cpu", "cause_asked_sleep", "cause_off_cpu",
                  "phase_data_path", "phase_control", "phase_housekeeping", "phase_spin", "phase_sleep")


def daemon_schedstat(topo):
    """(seconds on a CPU, seconds runnable but waiting for one) of every
    thread of the topology's daemons so far: the loop (and any engine
    lcore) and the EAL's mostly sleeping threads (schedstat's first two
    fields, in ns)."""
    on_cpu = waiting = 0
    for d in topo.daemons:
        task_dir = f"/proc/{d.proc.pid}/task"
        for tid in os.listdir(task_dir):
            try:
                with open(f"{task_dir}/{tid}/schedstat") as f:
                    fields = f.read().split()
            except (FileNotFoundError, ProcessLookupError):
                continue  # the thread ended between listing and reading
            on_cpu += int(fields[0])
            waiting += int(fields[1])
    return on_cpu / 1e9, waiting / 1e9


def daemon_cpu_seconds(topo):
    return daemon_schedstat(topo)[0]


def loop_counters(topo):
    """Each daemon's loop_stalls (docs/daemon.md, "Loop stalls") and idle
    (its sleeps) counter groups, {} where not served."""
    out = []
    for d in topo.daemons:
        try:
            stats = d.stats()
        except AssertionError:
            stats = {}
        out.append({"loop_stalls": stats.get("loop_stalls", {}), "idle": stats.get("idle", {})})
    return out


def counter_deltas(before, after):
    """loop_stalls and idle counters over a run, each daemon's; longest_ns
    is the longest round since the daemon started."""
    out = []
    for b, a in zip(before, after):
        stalls = {k: a["loop_stalls"].get(k, 0) - (b["loop_stalls"].get(k, 0) if k != "longest_ns" else 0)
                  for k in STALL_COUNTERS}
        idle = {k: a["idle"].get(k, 0) - b["idle"].get(k, 0) for k in IDLE_COUNTERS}
        out.append((stalls, idle))
    return out


def run_perftest(topo, tool, size, args, mtu=None, prefix=()):
    port = harness.free_tcp_port()

    def argv(endpoint):
        return [*prefix, tool, "-d", endpoint.device, "-x", str(endpoint.gid_index), "-m", str(mtu or endpoint.mtu),
                "-p", str(port), "-F", "-s", str(size), *args]

    result = harness.run_pair(topo, argv(topo.server), argv(topo.client) + [topo.server.tcp_host], port,
                              timeout=RUN_TIMEOUT)
    row = harness.perftest_row(result.client.output) if result.ok() else None
    if row is None:
        return {"error": result.summary()}
    return row


def bandwidth(topo, tool, size, seconds, qps, mtu=None, prefix=()):
    cpu_before = daemon_cpu_seconds(topo)
    row = run_perftest(topo, tool, size, ["-D", str(seconds), "-q", str(qps)], mtu, prefix)
    cpu = daemon_cpu_seconds(topo) - cpu_before
    if "error" in row:
        return row
    bw = next(v for k, v in row.items() if k.startswith("BW average"))
    mpps = row.get("MsgRate[Mpps]", 0.0)
    return {"MB/s": bw, "Mpps": mpps, "daemon_cpu_s": cpu,
            "Mpps_per_core": mpps * seconds / cpu if cpu > 0 else None}


def latency(topo, tool, iters, prefix=()):
    counters_before = loop_counters(topo)
    sched_before = daemon_schedstat(topo)
    row = run_perftest(topo, tool, LAT_SIZE, ["-n", str(iters)], prefix=prefix)
    sched = [after - before for before, after in zip(sched_before, daemon_schedstat(topo))]
    if "error" in row:
        return row
    deltas = counter_deltas(counters_before, loop_counters(topo))
    return {"us": row.get("t_typical[usec]"), "avg_us": row.get("t_avg[usec]"), "min_us": row.get("t_min[usec]"),
            "p99_us": row.get("99% percentile[usec]"), "p999_us": row.get("99.9% percentile[usec]"),
            "max_us": row.get("t_max[usec]"), "loop_stalls": [d[0] for d in deltas],
            "idle": [d[1] for d in deltas], "iters": iters, "daemon_cpu_s": sched[0],
            "daemon_cpu_wait_s": sched[1]}


def in_ns(ns, argv):
    return ["ip", "netns", "exec", ns, *argv]


def udp_floor(topo, seconds):
    """The kernel's UDP round trip between the two namespaces on the same
    veth (sockperf ping-pong of its smallest message, 14 B), with the daemons
    running on it."""
    port = harness.free_tcp_port()
    ns_server, ns_client = topo.net.ns
    server = subprocess.Popen(in_ns(ns_server, ["sockperf", "server", "-i", topo.net.ip[0], "-p", str(port)]),
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        harness.wait_listening(port, server, proto="udp")
        r = subprocess.run(in_ns(ns_client, ["sockperf", "ping-pong", "-i", topo.net.ip[0], "-p", str(port), "-m",
                                             str(SOCKPERF_MSG), "-t", str(seconds), "--full-rtt"]),
                           capture_output=True, text=True, timeout=RUN_TIMEOUT)
    finally:
        server.kill()
        server.wait()
    median = re.search(r"percentile 50\.000 =\s*([\d.]+)", r.stdout)
    p99 = re.search(r"percentile 99\.000 =\s*([\d.]+)", r.stdout)
    if r.returncode != 0 or not (median and p99):
        return {"error": (r.stdout + r.stderr).strip()[-500:]}
    return {"rtt_us": float(median.group(1)), "p99_us": float(p99.group(1))}


def iperf3(topo, seconds, client_args):
    """One iperf3 run from the second namespace to the first over the veth;
    its JSON report, or {"error": ...}."""
    port = harness.free_tcp_port()
    ns_server, ns_client = topo.net.ns
    server = subprocess.Popen(in_ns(ns_server, ["iperf3", "-s", "-1", "-B", topo.net.ip[0], "-p", str(port)]),
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        harness.wait_listening(port, server)
        r = subprocess.run(in_ns(ns_client, ["iperf3", "-c", topo.net.ip[0], "-p", str(port), "-t", str(seconds),
                                             "-J", *client_args]),
                           capture_output=True, text=True, timeout=RUN_TIMEOUT)
    finally:
        server.kill()
        server.wait()
    try:
        return json.loads(r.stdout)["end"]
    except (ValueError, KeyError):
        return {"error": (r.stdout + r.stderr).strip()[-500:]}


def tcp_floor(topo, seconds):
    """The host's TCP bandwidth between the two namespaces over the same veth
    (iperf3, one stream), with the daemons running on it."""
    end = iperf3(topo, seconds, [])
    if "error" in end:
        return end
    return {"MB/s": end["sum_received"]["bits_per_second"] / 8 / 1e6}


def udp_rate_floor(topo, seconds):
    """The kernel's UDP message rate over the same veth: iperf3 -u, one
    stream of 64-byte datagrams as fast as the sender can (-b 0), counted
    where they arrive (sent minus lost)."""
    end = iperf3(topo, seconds, ["-u", "-b", "0", "-l", str(UDP_RATE_MSG)])
    if "error" in end:
        return end
    s = end.get("sum_received", {})
    if not s.get("seconds"):
        return {"error": f"iperf3 -u reported no received sum: {str(end)[:300]}"}
    return {"Mpps": (s["packets"] - s["lost_packets"]) / s["seconds"] / 1e6, "lost": s["lost_packets"],
            "sent": s["packets"]}


def memcpy_floor(seconds):
    """One core's memcpy bandwidth on buffers larger than the caches:
    assigning a bytearray to a whole slice of one of the same length is one
    memmove in CPython, so the interpreter costs one call per 64 MiB."""
    src = bytearray(os.urandom(1 << 20)) * (MEMCPY_BYTES >> 20)
    dst = bytearray(MEMCPY_BYTES)
    copies, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        dst[:] = src
        copies += 1
    return {"MB/s": copies * MEMCPY_BYTES / (time.perf_counter() - start) / 1e6}


def bw_key(verb, size, qps, mtu=None):
    return f"{verb} bw {size} q{qps}" + (f" mtu {mtu}" if mtu else "")


def lat_key(verb):
    return f"{verb} lat {LAT_SIZE}"


def log(kind, key, fig):
    print(f"  {kind}: {key}: {fig}", file=sys.stderr)


def measure(kind, args, binaries):
    uroced, uroce = binaries
    topo = harness.Topology(kind, uroced, uroce, daemon_args=args.daemon_arg)
    figures = {"topology": topo.describe()}
    prefix = ["chrt", "-f", str(args.program_priority)] if args.program_priority else []
    try:
        for verb, bw_tool, lat_tool in VERBS:
            if verb not in args.verbs:
                continue
            for size in BW_SIZES if args.bandwidth else []:
                for qps in args.qps:
                    key = bw_key(verb, size, qps)
                    figures[key] = bandwidth(topo, bw_tool, size, args.seconds, qps, prefix=prefix)
                    log(kind, key, figures[key])
            figures[lat_key(verb)] = latency(topo, lat_tool, args.lat_iters, prefix=prefix)
            log(kind, lat_key(verb), figures[lat_key(verb)])
        if kind == "veth-jumbo" and "WRITE" in args.verbs and args.bandwidth:
            key = bw_key("WRITE", BW_SIZES[-1], args.qps[0], STANDARD_PATH_MTU)
            figures[key] = bandwidth(topo, "ib_write_bw", BW_SIZES[-1], args.seconds, args.qps[0],
                                     STANDARD_PATH_MTU, prefix)
            log(kind, key, figures[key])
        if kind in VETHS:
            for name, floor in (("udp", udp_floor), ("udp_rate", udp_rate_floor), ("tcp", tcp_floor)):
                figures[name] = floor(topo, args.seconds)
                log(kind, name, figures[name])
    finally:
        topo.close()
    return figures


# --- the table ---------------------------------------------------------------------------------------------

def ok(fig, *keys):
    return bool(fig) and "error" not in fig and all(fig.get(k) for k in keys)


def bw_cell(fig):
    if fig is None:
        return ""
    if "error" in fig:
        return "failed"
    return f"{fig['MB/s']:.1f} MB/s {fig['Mpps']:.3f} Mpps"


class Floors:
    """The floors one topology's figures are read against: the veth's own
    kernel figures for a veth, the 1500 veth's for memif (its programs'
    TCP runs there too), memcpy for everything."""

    def __init__(self, kind, results, memcpy):
        own = results.get(kind, {}) if kind in VETHS else results.get("veth", {})
        self.tcp = own.get("tcp")
        self.udp = own.get("udp")
        self.udp_rate = own.get("udp_rate")
        self.memcpy = memcpy
        self.where = "this veth" if kind in VETHS else "the 1500 veth"


def verdict(value, bound, higher_is_better):
    met = value >= bound if higher_is_better else value <= bound
    return "ok" if met else "MISS"


def floor_and_target(kind, key, figs, floors, qps):
    """(ratio against this run's floor, issue 16's target with this run's
    figure) for one row; empty strings where none applies."""
    fig = figs.get(key)
    wired = kind != "loopback"
    big, small = BW_SIZES[-1], BW_SIZES[0]
    if key.startswith(("WRITE bw", "READ bw", "SEND bw")) and ok(fig, "MB/s"):
        verb, _bw, size, *_ = key.split()
        size = int(size)
        if size == big and not wired and ok(floors.memcpy, "MB/s") and "mtu" not in key:
            r = fig["MB/s"] / floors.memcpy["MB/s"]
            target = f">= 0.7x memcpy: {verdict(r, 0.7, True)}" if verb == "WRITE" else ""
            return f"{r:.2f}x memcpy", target
        if size == big and wired and ok(floors.tcp, "MB/s") and "mtu" not in key:
            r = fig["MB/s"] / floors.tcp["MB/s"]
            target = f">= 1.0x TCP: {verdict(r, 1.0, True)}" if verb == "WRITE" else ""
            ref = figs.get(bw_key("WRITE", big, qps, STANDARD_PATH_MTU))
            if verb == "WRITE" and ok(ref, "MB/s"):
                m = fig["MB/s"] / ref["MB/s"]
                target += f"; >= 3x path MTU {STANDARD_PATH_MTU}: {m:.2f}x {verdict(m, 3.0, True)}"
            return f"{r:.2f}x TCP on {floors.where}", target
        if size == small and verb == "WRITE":
            per_core = fig.get("Mpps_per_core")
            floor = ""
            if wired and ok(floors.udp_rate, "Mpps"):
                floor = f"{fig['Mpps'] / floors.udp_rate['Mpps']:.2f}x UDP {UDP_RATE_MSG} B rate"
            if not wired and per_core:
                return floor, f">= 5 Mpps/core: {per_core / 5:.2f}x {verdict(per_core, 5.0, True)}"
            if wired:
                return floor, f">= 2 Mpps: {fig['Mpps'] / 2:.2f}x {verdict(fig['Mpps'], 2.0, True)}"
        return "", ""
    if key.startswith(("WRITE lat", "READ lat", "SEND lat")) and ok(fig, "us") and wired and ok(floors.udp, "rtt_us"):
        verb = key.split()[0]
        rtt = floors.udp["rtt_us"]
        if verb == "READ":  # a whole round trip
            return f"{fig['us'] / rtt:.2f}x UDP RTT", ""
        r = fig["us"] / (rtt / 2)
        target = f"<= 0.6x UDP 1-way: {verdict(r, 0.6, False)}" if verb == "WRITE" else ""
        return f"{r:.2f}x UDP 1-way", target
    return "", ""


def tail_cell(fig):
    if not ok(fig, "us", "p99_us"):
        return ""
    r = fig["p99_us"] / fig["us"]
    return (f"p99 {fig['p99_us']:.1f} ({r:.1f}x {verdict(r, P99_OVER_MEDIAN, False)}) "
            f"p99.9 {fig.get('p999_us') or 0:.1f} max {fig.get('max_us') or 0:.0f}")


def rows_of(kind, figs, floors, qps):
    """The table rows of one topology: (wire, test, -q first, -q second,
    Mpps/core, tail, floor, target)."""
    rows = []
    wire = HEADERS.get(kind, kind)
    q_first, q_rest = qps[0], qps[1:]
    for verb, _bw, _lat in VERBS:
        for size in BW_SIZES:
            key = bw_key(verb, size, q_first)
            if key not in figs:
                continue
            others = [figs.get(bw_key(verb, size, q)) for q in q_rest]
            per_core = " | ".join(f"{f['Mpps_per_core']:.3f}" if ok(f, "Mpps_per_core") else "-"
                                  for f in [figs[key], *others])
            floor, target = floor_and_target(kind, key, figs, floors, q_first)
            rows.append((wire, f"{verb} bw {size} B", bw_cell(figs[key]), " | ".join(bw_cell(f) for f in others),
                         per_core, "", floor, target))
        lat = figs.get(lat_key(verb))
        if lat is not None:
            floor, target = floor_and_target(kind, lat_key(verb), figs, floors, q_first)
            median = "failed" if "error" in lat else f"{lat['us']:.2f} us median"
            rows.append((wire, f"{verb} lat {LAT_SIZE} B", median, "", "", tail_cell(lat), floor, target))
    key = bw_key("WRITE", BW_SIZES[-1], q_first, STANDARD_PATH_MTU)
    if key in figs:
        rows.append((wire, f"WRITE bw {BW_SIZES[-1]} B mtu {STANDARD_PATH_MTU}", bw_cell(figs[key]), "",
                     f"{figs[key]['Mpps_per_core']:.3f}" if ok(figs[key], "Mpps_per_core") else "", "", "", ""))
    if kind in VETHS:
        udp, rate, tcp = figs.get("udp"), figs.get("udp_rate"), figs.get("tcp")
        rows.append((wire, f"kernel UDP RTT {SOCKPERF_MSG} B",
                     f"{udp['rtt_us']:.2f} us median" if ok(udp, "rtt_us") else "failed", "", "",
                     f"p99 {udp['p99_us']:.1f} ({udp['p99_us'] / udp['rtt_us']:.1f}x)" if ok(udp, "rtt_us") else "",
                     "floor (sockperf)", ""))
        rows.append((wire, f"kernel UDP rate {UDP_RATE_MSG} B",
                     f"{rate['Mpps']:.3f} Mpps" if ok(rate, "Mpps") else "failed", "", "", "", "floor (iperf3 -u)", ""))
        rows.append((wire, "kernel TCP bw", f"{tcp['MB/s']:.1f} MB/s" if ok(tcp, "MB/s") else "failed", "", "", "",
                     "floor (iperf3)", ""))
    return rows


def notes_of(kind, figs, qps):
    notes = []
    for verb, _bw, _lat in VERBS:
        for q in qps:
            series = [figs.get(bw_key(verb, s, q)) for s in BW_SIZES]
            if all(ok(f, "MB/s") for f in series) and any(b["MB/s"] <= a["MB/s"] for a, b in zip(series, series[1:])):
                notes.append(f"{kind}: {verb} -q {q} bandwidth does not grow with the message size")
        lat = figs.get(lat_key(verb))
        if not ok(lat, "us"):
            continue
        if lat["us"] >= TIMER_TICK_US:
            notes.append(f"{kind}: {verb} latency {lat['us']:.0f} us looks like a timer tick")
        if lat.get("p99_us") and lat["p99_us"] > P99_OVER_MEDIAN * lat["us"]:
            notes.append(f"{kind}: {verb} latency p99 {lat['p99_us']:.1f} us is {lat['p99_us'] / lat['us']:.1f}x "
                         f"its median")
        if lat.get("daemon_cpu_wait_s", 0) >= WAIT_WORTH_A_NOTE_S:
            notes.append(f"{kind}: {verb} latency: the daemons waited {lat['daemon_cpu_wait_s'] * 1e3:.1f} ms for a "
                         f"CPU during the run (runnable, the CPU taken), beside "
                         f"{lat['daemon_cpu_s'] * 1e3:.1f} ms on one")
        for i, idle in enumerate(lat.get("idle", [])):
            naps = idle.get("sleeps", 0) - idle.get("woken_by_fd", 0)
            if naps >= NAPS_WORTH_A_NOTE * idle.get("sleeps", 0) > 0:
                notes.append(f"{kind}: {verb} latency: daemon {i} slept {idle['sleeps'] / lat['iters']:.2f} times a "
                             f"round trip, {naps / idle['sleeps']:.0%} of them to their timeout (naps)")
        for i, s in enumerate(lat.get("loop_stalls", [])):
            # A stall whose largest share is the sleep the idle policy asked
            # for is an idle daemon waiting for the program, not a delay.
            causes = {k[6:]: v for k, v in s.items() if k.startswith("cause_") and k != "cause_asked_sleep" and v}
            if causes:
                notes.append(f"{kind}: {verb} latency: daemon {i} loop stalls not spent asleep as asked: "
                             + ", ".join(f"{k} {v}" for k, v in causes.items())
                             + f" (the longest round since the daemon started {s.get('longest_ns', 0) / 1e6:.1f} ms)")
    for key, fig in figs.items():
        if isinstance(fig, dict) and "error" in fig:
            notes.append(f"{kind}: {key} failed: {fig['error']}")
    return notes


def table(results, memcpy=None, load=None, qps=(1,), load_end=None):
    head = ("wire", "test", f"-q {qps[0]}", " | ".join(f"-q {q}" for q in qps[1:]),
            "Mpps/core " + " | ".join(f"q{q}" for q in qps), "latency tail", "vs floor (same run)", "issue 16 target")
    rows = []
    if memcpy:
        rows.append(("one core", f"memcpy {MEMCPY_BYTES >> 20} MiB", f"{memcpy['MB/s']:.1f} MB/s", "", "", "",
                     "floor (python)", ""))
    notes = []
    for kind, figs in results.items():
        rows += rows_of(kind, figs, Floors(kind, results, memcpy), qps)
        notes += notes_of(kind, figs, qps)
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    when = ""
    if load:
        when = f"; load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} at the start"
        if load_end:
            when += f", {load_end[0]:.2f} at the end"
    out = ["uroce benchmark, one run (perftest; latency: median t_typical, half a round trip, READ a whole one; "
           "Mpps/core: messages per second of the daemons' CPU)" + when, ""]
    for r in [head, *rows]:
        out.append("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())
    out += ["", "not measured here: issue 16's rdma_rxe rows (another machine), and -q 8 with 2 engine cores "
            "against 1 (uroced has one engine thread)"]
    if notes:
        out += ["", "notes:"] + [f"  - {n}" for n in notes]
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build-dir", default=os.path.join(ROOT, "build"))
    ap.add_argument("--topology", default=",".join(DEFAULT_KINDS),
                    help=f"comma-separated: {', '.join(KINDS)} (default: {', '.join(DEFAULT_KINDS)})")
    ap.add_argument("--verbs", default="WRITE,READ,SEND", help="comma-separated: WRITE, READ, SEND")
    ap.add_argument("--daemon-arg", action="append", default=[],
                    help="one more uroced flag for every daemon (repeatable): --daemon-arg=--realtime-priority=0")
    ap.add_argument("--seconds", type=int, default=2, help="duration of each bandwidth run (perftest -D)")
    ap.add_argument("--lat-iters", type=int, default=10000, help="iterations of each latency run (perftest -n)")
    ap.add_argument("--qps", default="1,8", help="comma-separated QP counts of the bandwidth runs (perftest -q)")
    ap.add_argument("--no-bandwidth", dest="bandwidth", action="store_false",
                    help="latency runs only (and the floors)")
    ap.add_argument("--program-priority", type=int, default=0,
                    help="run perftest SCHED_FIFO at this priority (chrt -f); 0: as started")
    ap.add_argument("--json", help="also write the figures to this file")
    args = ap.parse_args()
    binaries = [os.path.join(args.build_dir, p) for p in ("tools/uroced/uroced", "tools/uroce/uroce")]
    missing = [p for p in binaries if not os.access(p, os.X_OK)]
    if missing:
        print(f"roce_bench: not built: {', '.join(missing)} (ninja -C {args.build_dir})", file=sys.stderr)
        return 2
    args.verbs = args.verbs.split(",")
    args.qps = [int(q) for q in args.qps.split(",")]
    tools = [t for _v, bw, lat in VERBS for t in (bw, lat)]
    results = {}
    load = os.getloadavg()
    memcpy = memcpy_floor(args.seconds)
    print(f"roce_bench: memcpy {memcpy['MB/s']:.0f} MB/s", file=sys.stderr)
    for kind in args.topology.split(","):
        if kind not in KINDS:
            print(f"roce_bench: unknown topology {kind} (one of {', '.join(KINDS)})", file=sys.stderr)
            return 2
        floors = ["sockperf", "iperf3"] if kind in VETHS else []
        reason = harness.skip_reason(kind, tools + floors + (["chrt"] if args.program_priority else []))
        if reason:
            print(f"roce_bench: {kind}: {reason}", file=sys.stderr)
            return 2
        print(f"roce_bench: measuring over {kind}", file=sys.stderr)
        results[kind] = measure(kind, args, binaries)
    load_end = os.getloadavg()
    print(table(results, memcpy, load, args.qps, load_end))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"load": load, "load_end": load_end, "args": vars(args), "memcpy": memcpy, **results}, f,
                      indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
