#!/usr/bin/env python3
"""What the fault-injection and capture hooks cost when no rule is installed
and no capture runs: the message rate of ib_write_bw -s 64 on the embedded
loopback port, with both hooks (the default) and without them (uroced
--no-fault-hook --no-capture-hook), in alternating rounds so the machine's
load falls on both alike.

usage: sudo tools/bench/hook_cost.py [--build-dir build] [--rounds 5] [--seconds 3] [--pin]

Prints each round's two message rates and the ratio of the medians
(with / without); the issue's bound is a cost under 2% (ratio >= 0.98).

On a shared 2-core virtual machine one round's rate moves by 10% or more
whatever the hooks do, so the whole-program ratio cannot resolve 2% there.
The script therefore also derives the cost from parts that can be measured
finely: the hooks' time per frame (tests/bench/bench_fault_port, a frame sent
and received through the loopback port with and without both hooks), the
frames the daemon handles per message (its tx_packets over a counted run)
and the message rate. The daemon's one engine thread does all the work of a
loopback message, so hook time per message times messages per second is the
share of that thread the hooks take: an upper bound on the rate they cost.
Needs root (the device node); the daemons and programs it starts are gone
when it ends.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
import uroce_harness as harness  # noqa: E402

RUN_TIMEOUT = 120


def message_rate(daemon, seconds, program_cpu):
    topo = harness.LoopbackDaemon(daemon)
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


BENCH_BURST = 32  # frames per iteration of bench_fault_port's round_trip
COUNTED_MESSAGES = 1_000_000


def hook_ns_per_frame(bench, repetitions):
    """Median time per frame through both hooks minus through neither."""
    r = subprocess.run([bench, "--benchmark_format=json", f"--benchmark_repetitions={repetitions}",
                        "--benchmark_report_aggregates_only=true", "--benchmark_min_time=0.5"],
                       capture_output=True, text=True, timeout=600, check=True)
    medians = {b["run_name"]: b["real_time"] for b in json.loads(r.stdout)["benchmarks"]
               if b.get("aggregate_name") == "median" and b["time_unit"] == "ns"}
    direct = medians["BM_LoopbackDirect"] / BENCH_BURST
    hooked = medians["BM_LoopbackThroughIdleFaultAndCaptureHooks"] / BENCH_BURST
    return direct, hooked


def frames_per_message(daemon, program_cpu):
    """tx_packets of the daemon over a run of a known number of messages (on
    the loopback port each frame is sent and received by this one daemon)."""
    before = daemon.stats()["engine"]["tx_packets"]
    topo = harness.LoopbackDaemon(daemon)
    port = harness.free_tcp_port()
    pin = [] if program_cpu is None else ["taskset", "-c", str(program_cpu)]

    def argv(e):
        return pin + ["ib_write_bw", "-d", e.device, "-x", str(e.gid_index), "-m", str(e.mtu), "-p", str(port), "-F",
                      "-s", "64", "-n", str(COUNTED_MESSAGES)]

    result = harness.run_pair(topo, argv(topo.server), argv(topo.client) + ["127.0.0.1"], port, timeout=RUN_TIMEOUT)
    if not result.ok():
        raise RuntimeError(result.summary() + "\n" + result.describe())
    return (daemon.stats()["engine"]["tx_packets"] - before) / COUNTED_MESSAGES


def print_derived_bound(bench, daemon, rate_mpps, program_cpu, repetitions):
    if not os.path.exists(bench):
        print(f"derived bound: not measured, {bench} is not built (meson option bench)")
        return
    direct, hooked = hook_ns_per_frame(bench, repetitions)
    per_frame = hooked - direct
    frames = frames_per_message(daemon, program_cpu)
    share = per_frame * frames * rate_mpps / 1000
    print(f"derived: a frame round the loopback port {direct:.2f} ns, through both idle hooks {hooked:.2f} ns "
          f"(+{per_frame:.2f} ns); {frames:.3f} frames per message; at {rate_mpps:.4f} Mpps the hooks take "
          f"at most {100 * share:.2f}% of the engine thread")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build-dir", default=os.path.join(ROOT, "build"))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seconds", type=int, default=3)
    ap.add_argument("--pin", action="store_true",
                    help="daemons on the last processor, programs on the first (needs 2 or more)")
    ap.add_argument("--bench-repetitions", type=int, default=9,
                    help="repetitions of bench_fault_port for the derived bound")
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
                d.pin_to(cpus[-1])
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
        bench = os.path.join(args.build_dir, "tests/bench/bench_fault_port")
        print_derived_bound(bench, daemons["hook"], without, program_cpu, args.bench_repetitions)
    finally:
        for d in daemons.values():
            d.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
