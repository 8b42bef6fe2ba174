#!/usr/bin/env python3
"""Instructions the daemon executes per message, counted by valgrind's
callgrind: a figure that does not move with the load of a shared machine,
for telling whether a change made the data path cheaper or dearer.

usage: sudo tools/bench/instructions.py --side old=/path/to/old/build --side new=build
                                        [--figure write64 --figure write64k ...] [--top 25]
                                        [--daemon-arg new=--realtime-priority=0] [--no-pin]

Each side is a build directory (tools/uroced/uroced and tools/uroce/uroce
in it). For every figure and side, one loopback uroced runs under
callgrind and perftest (natively, through that side's own `uroce exec`)
runs twice, N1 and then N2 iterations; the counts are zeroed before and
dumped after each run (callgrind_control), so

    instructions per message = (I(N2) - I(N1)) / (N2 - N1)

cancels what does not grow with the messages (the programs' connection,
queue pair and memory registration). The daemon runs 20-50 times slower
under callgrind, so work the loop does by the clock (the stall watch's
samples, timers) is over-represented; the programs' queue depth (-t, per
figure) keeps retransmission timers from firing, and the script says so
if any did (`uroce stats`). The daemon runs on the last processor and the programs on the first
(--no-pin leaves them free). Prints instructions per message per figure and side,
the ratio to the first side, and with --top N the N functions whose
exclusive count per message changed most between the first two sides.
Needs root (the device node), valgrind and perftest.
"""

import argparse
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
import uroce_harness as harness  # noqa: E402

# name: (perftest program, message size, N1, N2, queue depth (-t)). The depth
# keeps the slowed daemon busy (a round with nothing to do is counted too,
# and how many there are depends on timing) and yet short enough that no
# message waits out perftest's ACK timeout: 64 one-packet messages, or 8
# of 64 packets.
FIGURES = {
    "write64": ("ib_write_bw", 64, 5000, 15000, 64),
    "write64k": ("ib_write_bw", 65536, 200, 600, 8),
    "send64k": ("ib_send_bw", 65536, 200, 600, 8),
    "read64k": ("ib_read_bw", 65536, 200, 600, 8),
}
# What callgrind_annotate lists that is not a function of the daemon's own.
NOT_FUNCTIONS = re.compile(r"^$|^__libc_start_main|below main|^0x[0-9a-f]+$")


class CallgrindDaemon:
    """A loopback uroced under callgrind whose counts can be zeroed and dumped."""

    def __init__(self, build, label, extra, cpu):
        self.out = tempfile.mkdtemp(prefix=f"uroce-callgrind-{label}-")
        wrapper = ["valgrind", "--tool=callgrind", "--dump-instr=no",
                   f"--callgrind-out-file={self.out}/callgrind.%p.out"]
        self.daemon = harness.Daemon(os.path.join(build, "tools/uroced/uroced"), os.path.join(build, "tools/uroce/uroce"),
                                     name=f"uroce_cg{label}", ip="192.0.2.78", ready_seconds=120, wrapper=wrapper,
                                     extra=extra)
        self.program_pin = []
        if cpu is not None:
            self.daemon.pin_to(cpu.daemon)
            self.program_pin = ["taskset", "-c", str(cpu.programs)]

    def control(self, *args):
        subprocess.run(["callgrind_control", *args, str(self.daemon.proc.pid)], check=True, capture_output=True)

    def counted_run(self, tool, size, iters, depth):
        """Zero, run perftest `iters` messages, dump: the dump file's path."""
        self.control("-z")
        topo = harness.LoopbackDaemon(self.daemon)
        port = harness.free_tcp_port()

        def argv(e):
            return self.program_pin + [tool, "-d", e.device, "-x", str(e.gid_index), "-m", str(e.mtu), "-p", str(port), "-F", "-s",
                    str(size), "-n", str(iters), "-t", str(depth)]

        result = harness.run_pair(topo, argv(topo.server), argv(topo.client) + ["127.0.0.1"], port, timeout=900)
        if not result.ok():
            raise RuntimeError(result.summary() + "\n" + result.describe())
        before = set(glob.glob(f"{self.out}/*"))
        self.control("-d", f"{tool}-{size}-{iters}")
        return max(set(glob.glob(f"{self.out}/*")) - before, key=os.path.getmtime)

    def retransmits(self):
        engine = self.daemon.stats().get("engine", {})
        return engine.get("retransmits", 0) + engine.get("timeouts", 0)

    def close(self):
        self.daemon.close()
        shutil.rmtree(self.out, ignore_errors=True)


def total_instructions(dump):
    with open(dump) as f:
        m = re.search(r"^(?:summary|totals):\s+(\d+)", f.read(), re.M)
    return int(m.group(1))


def per_function(dump):
    """{function: exclusive instructions} of one dump (callgrind_annotate)."""
    text = subprocess.run(["callgrind_annotate", "--auto=no", "--threshold=100", "--inclusive=no", dump],
                          capture_output=True, text=True, check=True).stdout
    counts = {}
    for line in text.splitlines():
        m = re.match(r"\s*([\d,]+) \(\s*[\d.]+%\)\s+(.*)", line)
        if not m or "PROGRAM TOTALS" in line:
            continue
        name = re.sub(r" \[[^]]*\]$", "", m.group(2).strip())
        name = name.split(":", 1)[1] if re.match(r"^(\?\?\?|[^ (]*\.(cc|h|c|S)):", name) else name
        name = name.split("(")[0]
        if NOT_FUNCTIONS.search(name):
            continue
        counts[name] = counts.get(name, 0) + int(m.group(1).replace(",", ""))
    return counts


def measure(build, label, figure, extra, cpu):
    tool, size, n1, n2, depth = FIGURES[figure]
    d = CallgrindDaemon(build, label, extra, cpu)
    try:
        first = d.counted_run(tool, size, n1, depth)
        second = d.counted_run(tool, size, n2, depth)
        per_message = (total_instructions(second) - total_instructions(first)) / (n2 - n1)
        before = per_function(first)
        functions = {k: (v - before.get(k, 0)) / (n2 - n1) for k, v in per_function(second).items()}
        return per_message, functions, d.retransmits()
    finally:
        d.close()


class Cpus:
    """The daemon on the last processor, the programs on the first: each
    side's daemon then finds the same work per round whatever its
    scheduling class (a real-time loop sharing a processor with the
    programs would run more, emptier rounds)."""

    def __init__(self):
        cpus = sorted(os.sched_getaffinity(0))
        self.daemon, self.programs = cpus[-1], cpus[0]


def print_top(figure, sides, functions, top):
    (a, _), (b, _) = sides[:2]
    fa, fb = functions[(a, figure)], functions[(b, figure)]
    names = sorted(set(fa) | set(fb), key=lambda k: -abs(fb.get(k, 0) - fa.get(k, 0)))
    print(f"\n{figure}: exclusive instructions per message, the {top} largest changes from {a} to {b}")
    for name in names[:top]:
        print(f"  {fa.get(name, 0):9.0f} {fb.get(name, 0):9.0f} {fb.get(name, 0) - fa.get(name, 0):+9.0f}  {name[:90]}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--side", action="append", required=True, metavar="LABEL=BUILD_DIR",
                    help="a build to measure (the first is the reference of the ratios)")
    ap.add_argument("--figure", action="append", choices=sorted(FIGURES), help="default: write64 and write64k")
    ap.add_argument("--daemon-arg", action="append", default=[], metavar="LABEL=ARG",
                    help="an extra uroced argument for one side")
    ap.add_argument("--no-pin", action="store_true", help="leave the daemon and programs unpinned")
    ap.add_argument("--top", type=int, default=0, help="show the N functions that changed most (two sides or more)")
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("needs root (the device node)")
        return 77
    missing = harness.missing_tools(["valgrind", "callgrind_control", "callgrind_annotate", "ib_write_bw"])
    if missing:
        print(f"needs {', '.join(missing)}")
        return 77
    sides, extra = harness.build_sides(args.side, args.daemon_arg)
    cpu = None if args.no_pin or len(os.sched_getaffinity(0)) < 2 else Cpus()
    figures = args.figure or ["write64", "write64k"]
    results, functions = {}, {}
    for figure in figures:
        for label, build in sides:
            per_message, funcs, retransmits = measure(build, label, figure, extra[label], cpu)
            results[(label, figure)] = per_message
            functions[(label, figure)] = funcs
            note = f" ({retransmits} retransmissions or timeouts: the figure includes them)" if retransmits else ""
            print(f"{figure:9s} {label:10s} {per_message:10.0f} instructions per message{note}", flush=True)
    ref = sides[0][0]
    print(f"\nratio to {ref} (below 1: fewer instructions)")
    for figure in figures:
        print(f"  {figure:9s} " + "  ".join(f"{label} {results[(label, figure)] / results[(ref, figure)]:.3f}"
                                             for label, _ in sides))
    if args.top and len(sides) >= 2:
        for figure in figures:
            print_top(figure, sides, functions, args.top)
    return 0


if __name__ == "__main__":
    sys.exit(main())
