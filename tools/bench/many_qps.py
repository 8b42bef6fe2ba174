#!/usr/bin/env python3
"""Many QPs against few over the veth (docs/congestion.md): ib_write_bw and
ib_read_bw with -q FEW and -q MANY moving the same bytes, alternated, several
pairs; prints every run's bandwidth with the daemons' retry counters for it
(timeouts, go-back events, packets resent, frames the port refused), then per
tool the medians and the median of the per-pair ratios MANY / FEW.

usage: sudo tools/bench/many_qps.py [--build-dir build-test] [--pairs 5]
                                    [--tools ib_write_bw,ib_read_bw] [--topology veth]
                                    [--loop-many N] [--uroced PATH] [--json FILE]

--loop-many N: instead, runs `TOOL -q MANY` N times in a row and counts how
many end in an error (RETRY_EXC_ERR shows up as a failed run), with their
counters.
Each run is the dataflow test's (tests/integration/dataflow/test_perftest.py):
64 KiB messages, 2560 in all. The daemons, programs and namespaces it starts
are gone when it ends.
"""

import argparse
import json
import os
import statistics
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
import uroce_harness as harness  # noqa: E402

FEW, MANY = 8, 256
SIZE = 65536
MESSAGES = 2560
RUN_TIMEOUT = 120
COUNTERS = ["timeouts", "retransmits", "retransmitted_packets", "tx_deferred", "seq_naks_received", "tx_packets"]


def counters_now(topo):
    """The engine counters summed over the daemons (both ends' requesters)."""
    total = dict.fromkeys(COUNTERS, 0)
    for d in topo.daemons:
        c = d.stats()["engine"]
        for k in COUNTERS:
            total[k] += c.get(k, 0)
    return total


def run(topo, tool, qps):
    port = harness.free_tcp_port()
    iters = MESSAGES // qps

    def argv(endpoint):
        return [tool, "-d", endpoint.device, "-x", str(endpoint.gid_index), "-m", str(endpoint.mtu), "-p", str(port),
                "-F", "-s", str(SIZE), "-n", str(iters), "-q", str(qps)]

    before = counters_now(topo)
    result = harness.run_pair(topo, argv(topo.server), argv(topo.client) + [topo.server.tcp_host], port,
                              timeout=RUN_TIMEOUT)
    after = counters_now(topo)
    out = {"tool": tool, "qps": qps, **{k: after[k] - before[k] for k in COUNTERS}}
    row = harness.perftest_row(result.client.output) if result.ok() else None
    if row is None:
        out["error"] = result.summary() + " " + (result.client.first_error() or result.server.first_error() or "")
    else:
        out["mbps"] = next(v for k, v in row.items() if k.startswith("BW average"))
    return out


def show(r):
    fig = f"{r['mbps']:8.1f} MB/s" if "mbps" in r else f"FAILED ({r['error'].strip()[:120]})"
    print(f"{r['tool']:12} -q {r['qps']:3}: {fig}  " + " ".join(f"{k} {r[k]}" for k in COUNTERS), flush=True)


def pairs(topo, tool, count):
    runs = []
    for _ in range(count):
        few = run(topo, tool, FEW)
        show(few)
        many = run(topo, tool, MANY)
        show(many)
        runs.append((few, many))
    return runs


def summary(tool, runs):
    ok = [(f, m) for f, m in runs if "mbps" in f and "mbps" in m]
    lines = [f"{tool}: {len(ok)} of {len(runs)} pairs completed"]
    if ok:
        few = statistics.median(f["mbps"] for f, _ in ok)
        many = statistics.median(m["mbps"] for _, m in ok)
        ratios = [m["mbps"] / f["mbps"] for f, m in ok]
        timeouts = statistics.median(m["timeouts"] for _, m in runs)
        lines.append(f"  median -q {FEW} {few:.1f} MB/s, -q {MANY} {many:.1f} MB/s ({many / few:.2f}); ratios per "
                     f"pair {' '.join(f'{x:.2f}' for x in ratios)}, median {statistics.median(ratios):.2f}; "
                     f"-q {MANY} timeouts per run: median {timeouts}, max {max(m['timeouts'] for _, m in runs)}")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build-dir", default="build-test")
    ap.add_argument("--pairs", type=int, default=5)
    ap.add_argument("--tools", default="ib_write_bw,ib_read_bw")
    ap.add_argument("--topology", choices=["veth", "loopback"], default="veth")
    ap.add_argument("--loop-many", type=int, default=0)
    ap.add_argument("--uroced", help="another uroced binary (e.g. an older build, for a before/after)")
    ap.add_argument("--json")
    args = ap.parse_args()
    build = os.path.join(ROOT, args.build_dir)
    harness.set_binaries(args.uroced or os.path.join(build, "tools/uroced/uroced"),
                         os.path.join(build, "tools/uroce/uroce"))
    tools = args.tools.split(",")
    reason = harness.skip_reason(args.topology, tools)
    if reason:
        print(f"cannot run: {reason}", file=sys.stderr)
        return 1
    uroced, uroce = harness._binaries()
    topo = harness.Topology(args.topology, uroced, uroce)
    results = {}
    try:
        print(topo.describe(), flush=True)
        for tool in tools:
            if args.loop_many:
                runs = []
                for _ in range(args.loop_many):
                    runs.append(run(topo, tool, MANY))
                    show(runs[-1])
                failed = sum(1 for r in runs if "error" in r)
                print(f"{tool} -q {MANY}: {failed} of {len(runs)} runs failed; timeouts per run "
                      f"{' '.join(str(r['timeouts']) for r in runs)}", flush=True)
                results[tool] = runs
            else:
                results[tool] = pairs(topo, tool, args.pairs)
        if not args.loop_many:
            for tool in tools:
                print(summary(tool, results[tool]))
    finally:
        topo.close()
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
