#!/usr/bin/env python3
"""Runs `ibv_rc_pingpong -s 65536 -c` with the kernel's rdma_rxe as server
and uroce as client RUNS times in a row against one guest, and counts the
runs that pass (docs/interop.md, "The 50-run loop"). Not part of CI: it takes
tens of minutes under TCG.

usage: loop_rc_pingpong.py UROCED UROCE CACHE_DIR [--runs 50] [--iters 1000]
       [--size 65536] [--keep-failed DIR]

A run passes when both programs exit 0 within --timeout seconds. The tap is
captured for each run; with --keep-failed, the capture and both programs'
output of every failed run are kept in DIR. Exit 0 when every run passed, 1
otherwise, 77 when the guest cannot run here.
"""

import argparse
import os
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import interop_env as ienv  # noqa: E402
from interop_env import Direction, Meeting  # noqa: E402

TCP_PORT = 18600


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("uroced")
    ap.add_argument("uroce")
    ap.add_argument("cache")
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--iters", type=int, default=1000, help="ibv_rc_pingpong -n (its default is 1000)")
    ap.add_argument("--size", type=int, default=65536)
    ap.add_argument("--timeout", type=float, default=300, help="seconds one run may take")
    ap.add_argument("--keep-failed", help="directory for the capture and output of failed runs")
    args = ap.parse_args()
    reason = ienv.skip_reason()
    if reason:
        print(f"SKIP: {reason}")
        return ienv.SKIP
    env = ienv.Env(os.path.abspath(args.uroced), os.path.abspath(args.uroce), args.cache, capture=False,
                    device="uroce_loop")
    passed, times = 0, []
    try:
        server_end, client_end = env.endpoints(Direction.UROCE_CLIENT)

        def argv(end, role):
            a = ["ibv_rc_pingpong", "-d", end.device, "-g", str(end.gid_index), "-p", str(TCP_PORT), "-m",
                 str(ienv.PATH_MTU), "-s", str(args.size), "-n", str(args.iters), "-c"]
            return a + ([server_end.ip] if role == "client" else [])

        for run in range(1, args.runs + 1):
            pcap = os.path.join(env.tmp.name, f"run{run}.pcap")
            capture = subprocess.Popen(env.guest.in_netns(["tcpdump", "-i", ienv.guestmod.TAP, "-U", "-n", "-s", "128",
                                                           "-w", pcap, "udp port 4791"]),
                                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            _wait_listening_line(capture)
            outcome = env.run_pair(Direction.UROCE_CLIENT, argv(server_end, "server"), argv(client_end, "client"),
                                   Meeting.TCP, tcp_port=TCP_PORT, timeout=args.timeout)
            capture.terminate()
            capture.wait(timeout=30)
            ok = outcome.ok() and env.daemon.alive()
            passed += ok
            times.append(outcome.seconds)
            print(f"run {run:2d}: {'pass' if ok else 'FAIL'} {outcome.seconds:6.1f} s{outcome.note}", flush=True)
            if not ok:
                print(outcome.describe(), flush=True)
                if args.keep_failed:
                    os.makedirs(args.keep_failed, exist_ok=True)
                    shutil.copy(pcap, os.path.join(args.keep_failed, f"run{run}.pcap"))
                    with open(os.path.join(args.keep_failed, f"run{run}.txt"), "w") as f:
                        f.write(outcome.describe() + "\n--- uroced log\n" + env.daemon.log_text())
                if not env.daemon.alive():
                    break
            os.remove(pcap)
    finally:
        env.close()
    print(f"{passed} of {args.runs} runs passed (ibv_rc_pingpong -s {args.size} -n {args.iters} -c, rxe server, "
          f"uroce client); run time min {min(times):.1f} s, max {max(times):.1f} s")
    return 0 if passed == args.runs else 1


def _wait_listening_line(capture, seconds=30):
    """tcpdump prints 'listening on' once it captures; bounded wait for it."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        line = capture.stderr.readline()
        if "listening on" in line:
            return
        if not line and capture.poll() is not None:
            raise RuntimeError("tcpdump exited before it captured")
    raise RuntimeError(f"tcpdump did not start in {seconds} s")


if __name__ == "__main__":
    sys.exit(main())
