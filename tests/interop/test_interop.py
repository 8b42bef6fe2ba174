#!/usr/bin/env python3
"""uroce against the Linux kernel's rdma_rxe, live (docs/interop.md).

usage: test_interop.py UROCED UROCE CACHE_DIR [--only SUBSTRING]... [--repeat N]

Boots Debian 12's kernel in QEMU (TCG, 2 vCPUs) once, with rdma_rxe on the
guest's eth0; a uroced in a host network namespace on the other end of the
guest's tap. Every case runs both ways (uroce client against an rxe server,
then rxe client against a uroce server): the stock verbs pingpongs with
their data checked (-c), perftest's bandwidth and latency tests, the same
rc_pingpong and ib_write_bw under 5% loss each way (netem in the guest),
and rping, ucmatose and udaddy through the kernel's rdma_cm and uroce's.
The tap is captured all along; `uroce decode` must read every RoCE frame of
it with a good ICRC. Prints a pass/fail matrix.

Before the cases, a program under `uroce exec` in the guest, where rxe has
loaded the kernel's RDMA stack, must list the uroce device
(guest_uroce_exec.py).

Iteration counts are small: under TCG the guest runs 50-100x slower than
native. Exit 77 (skipped) with the reason when not root, a tool is missing
or the guest cannot be built.
"""

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import interop_env as ienv  # noqa: E402
import guest_uroce_exec  # noqa: E402
from interop_env import Direction, Meeting  # noqa: E402

TCP_PORT = 18515
CM_PORT = 7174
LOSS_PERCENT = 5
# The last lines of each program a failed run's summary repeats at the end.
FAILURE_TAIL_LINES = 8


class Case:
    """One program pair. argv(endpoint, role, server) gives a side's argv:
    role is 'server' or 'client', server the server's endpoint."""

    def __init__(self, name, argv, meeting=Meeting.TCP, expect=None, timeout=180, known_exit_race=None,
                 pingpong_iters=None):
        self.name, self.argv, self.meeting, self.expect, self.timeout = name, argv, meeting, expect, timeout
        # A message a program prints when it trips over its own teardown
        # after its work is done and checked (the client's exit status is
        # then not the interop's verdict; everything else still must hold).
        self.known_exit_race = known_exit_race
        # An ibv_rc_pingpong case under loss: its last SEND's ACK lost after
        # the peer exited is explained (harness.pingpong_last_ack_lost).
        self.pingpong_iters = pingpong_iters


def pingpong(program, size, iters, events=False, extra=()):
    def argv(end, role, server):
        a = [program, "-d", end.device, "-g", str(end.gid_index), "-p", str(TCP_PORT), "-s", str(size),
             "-n", str(iters), "-c", *extra]
        if program != "ibv_ud_pingpong":  # UD has no path MTU
            a += ["-m", str(ienv.PATH_MTU)]
        if events:
            a.append("-e")
        return a + ([server.ip] if role == "client" else [])
    return argv


def perftest(tool, size, iters, extra=()):
    def argv(end, role, server):
        a = [tool, "-d", end.device, "-x", str(end.gid_index), "-m", str(ienv.PATH_MTU), "-p", str(TCP_PORT),
             "-F", "-s", str(size), "-n", str(iters), *extra]
        return a + ([server.ip] if role == "client" else [])
    return argv


def rping(count, size):
    def argv(end, role, server):
        return ["rping", "-s" if role == "server" else "-c", "-a", server.ip, "-p", str(CM_PORT), "-v", "-V",
                "-C", str(count), "-S", str(size)]
    return argv


def ucmatose(connections, messages):
    def argv(end, role, server):
        a = ["ucmatose", "-p", str(CM_PORT + 1), "-c", str(connections), "-C", str(messages)]
        return a + (["-s", server.ip] if role == "client" else [])
    return argv


def udaddy():
    def argv(end, role, server):
        # udaddy has no port option (its -p is the port space): it uses its fixed port.
        return ["udaddy"] + (["-s", server.ip] if role == "client" else [])
    return argv


def has_result_row(out):
    return "#bytes" in out


def rping_count(count):
    return lambda out: sum(1 for line in out.splitlines() if line.startswith("ping data: rdma-ping-")) == count


CASES = (
    [Case(f"rc_pingpong {s} B -e", pingpong("ibv_rc_pingpong", s, n, events=True))
     for s, n in ((64, 100), (4096, 50), (65536, 20))]
    + [Case("uc_pingpong 4096 B", pingpong("ibv_uc_pingpong", 4096, 50)),
       Case("ud_pingpong 512 B", pingpong("ibv_ud_pingpong", 512, 50)),
       Case("srq_pingpong 4096 B", pingpong("ibv_srq_pingpong", 4096, 20, extra=["-q", "4"]))]
    + [Case(f"{t} 64 KiB", perftest(t, 65536, 50), expect=has_result_row)
       for t in ("ib_write_bw", "ib_read_bw", "ib_send_bw")]
    + [Case(f"ib_atomic_bw {a}", perftest("ib_atomic_bw", 8, 100, ["-A", a]), expect=has_result_row)
       for a in ("FETCH_AND_ADD", "CMP_AND_SWAP")]
    + [Case(f"{t} 2 B", perftest(t, 2, 100), expect=has_result_row)
       for t in ("ib_write_lat", "ib_read_lat", "ib_send_lat")]
)
LOSS_PINGPONG_ITERS = 50
LOSS_CASES = [
    Case(f"rc_pingpong 4096 B, {LOSS_PERCENT}% loss", pingpong("ibv_rc_pingpong", 4096, LOSS_PINGPONG_ITERS),
         timeout=300, pingpong_iters=LOSS_PINGPONG_ITERS),
    Case(f"ib_write_bw 64 KiB, {LOSS_PERCENT}% loss", perftest("ib_write_bw", 65536, 50), expect=has_result_row,
         timeout=300),
]
CM_CASES = [
    # rping's client destroys its event channel while its CM thread may still
    # be reading it (librdmacm 44's rping.c): after the last ping it can exit
    # 255 with "rdma_get_cm_event: Bad file descriptor", whatever the device.
    Case("rping 10 x 64 B", rping(10, 64), Meeting.RDMA_CM, expect=rping_count(10),
         known_exit_race="rdma_get_cm_event: Bad file descriptor"),
    Case("ucmatose 2 conn", ucmatose(2, 10), Meeting.RDMA_CM, expect=lambda out: "return status 0" in out),
    Case("udaddy", udaddy(), Meeting.RDMA_CM, expect=lambda out: "return status 0" in out),
]


class Matrix:
    def __init__(self):
        self.rows = {}  # case name -> {Direction: (ok, seconds, why)}
        self.failed = []  # (case name, Direction, why, outcome) of every failed run, in order
        self.counts = {}  # (case name, Direction) -> {"pass": n, "explained": n, "FAIL": n}

    def record(self, case, direction, ok, seconds, why="", outcome=None, explained=False):
        # With --repeat a case runs several times: its cell keeps the first failure.
        cells = self.rows.setdefault(case.name, {})
        if not ok or direction not in cells or cells[direction][0]:
            cells[direction] = (ok, seconds, why)
        if not ok:
            self.failed.append((case.name, direction, why, outcome))
        count = self.counts.setdefault((case.name, direction), {"pass": 0, "explained": 0, "FAIL": 0})
        count["FAIL" if not ok else "explained" if explained else "pass"] += 1

    def runs(self):
        """Per case and direction: runs passed, passed as explained, failed."""
        return "; ".join(f"{name} ({d.value}): " + ", ".join(f"{v} {k}" for k, v in c.items())
                         for (name, d), c in self.counts.items())

    def failures(self):
        return [(name, d, r[2]) for name, cells in self.rows.items() for d, r in cells.items() if not r[0]]

    def failure_summary(self, lines=FAILURE_TAIL_LINES):
        """Why each failed run failed, with the last lines of both programs;
        printed last, so a console that keeps only the end of the log shows it."""
        out = []
        for name, direction, why, outcome in self.failed:
            out.append(f"FAIL {name} ({direction.value}): {why}")
            if outcome is not None:
                out.append(outcome.describe(lines))
        return "\n".join(out)

    def text(self):
        width = max(len(n) for n in self.rows) if self.rows else 10
        head = f"{'case':<{width}}  " + "  ".join(f"{d.value:<26}" for d in Direction)
        lines = [head, "-" * len(head)]
        for name, cells in self.rows.items():
            row = []
            for d in Direction:
                if d in cells:
                    ok, seconds, _ = cells[d]
                    row.append(f"{'pass' if ok else 'FAIL'} {seconds:6.1f} s".ljust(26))
                else:
                    row.append("-".ljust(26))
            lines.append(f"{name:<{width}}  " + "  ".join(row))
        return "\n".join(lines)


def explained_failure(case, direction, outcome):
    """A note when `outcome` failed only in a way the programs themselves
    cause, whatever the device; None otherwise."""
    if (case.known_exit_race and outcome.server.returncode == 0 and outcome.client.returncode not in (0, None)
            and case.known_exit_race in outcome.client.output):
        return f" [client exit {outcome.client.returncode} after its work: {case.known_exit_race}]"
    rxe_role = "server" if direction is Direction.UROCE_CLIENT else "client"
    if case.pingpong_iters and ienv.harness.pingpong_last_ack_lost(outcome, case.pingpong_iters,
                                                                   endless_retries=(rxe_role,)):
        failed = outcome.server if outcome.server.returncode != 0 or outcome.server.killed else outcome.client
        return f" [the last SEND's ACK was lost after the peer exited (no closing handshake): {failed.role} {failed.how()}]"
    return None


def run_case(env, matrix, case):
    for direction in Direction:
        server_end, client_end = env.endpoints(direction)
        outcome = env.run_pair(direction, case.argv(server_end, "server", server_end),
                               case.argv(client_end, "client", server_end), case.meeting,
                               tcp_port=TCP_PORT, timeout=case.timeout)
        ok = outcome.ok()
        why = "" if ok else outcome.summary()
        explained = None if ok else explained_failure(case, direction, outcome)
        if explained:
            ok, why = True, ""
            outcome.note += explained
        if ok and case.expect is not None and not case.expect(outcome.client.output):
            ok, why = False, "the client's output lacks what the case expects"
        if not env.daemon.alive():
            ok, why = False, "uroced died"
        matrix.record(case, direction, ok, outcome.seconds, why, outcome, explained=bool(explained))
        status = "pass" if ok else "FAIL"
        print(f"{status}  {case.name:<32} {direction.value:<26} {outcome.seconds:6.1f} s{outcome.note}",
              file=sys.stderr, flush=True)
        if not ok:
            print(f"{why}\n{outcome.describe()}\n--- uroced log\n{ienv.harness.tail(env.daemon.log_text(), 20)}",
                  file=sys.stderr, flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("uroced")
    ap.add_argument("uroce")
    ap.add_argument("cache")
    ap.add_argument("--only", action="append", help="run only the cases whose name contains this (repeatable)")
    ap.add_argument("--repeat", type=int, default=1, help="run each selected case this many times (one guest)")
    args = ap.parse_args()
    reason = ienv.skip_reason()
    if reason:
        print(f"SKIP: {reason}")
        return ienv.SKIP
    started = time.monotonic()
    env = ienv.Env(os.path.abspath(args.uroced), os.path.abspath(args.uroce), args.cache)
    matrix = Matrix()
    totals, icrc_ok = {}, False
    exec_ok, exec_line = False, "not run"
    try:
        print(f"guest ready in {env.guest.boot_seconds:.1f} s: {env.guest.banner}", file=sys.stderr, flush=True)
        exec_ok, exec_line, exec_out = guest_uroce_exec.check(env.guest, env.uroce, env.daemon.state,
                                                              env.uroce_end.device, ienv.RXE_DEVICE)
        print(f"{'pass' if exec_ok else 'FAIL'}  uroce exec in the guest beside rxe: {exec_line}", file=sys.stderr,
              flush=True)
        if not exec_ok:
            print(exec_out, file=sys.stderr, flush=True)
        selected = lambda cases: [c for c in cases if not args.only or any(o in c.name for o in args.only)]  # noqa: E731
        repeated = lambda cases: [c for c in selected(cases) for _ in range(args.repeat)]  # noqa: E731
        for case in repeated(CASES):
            run_case(env, matrix, case)
        loss = repeated(LOSS_CASES)
        if loss:
            env.set_loss(LOSS_PERCENT)
            try:
                for case in loss:
                    run_case(env, matrix, case)
                print(f"netem drops (guest egress, ingress): {env.loss_counters()}", file=sys.stderr)
            finally:
                env.set_loss(0)
        for case in repeated(CM_CASES):
            run_case(env, matrix, case)
        rc, totals, err = env.decode_capture()
        icrc_ok = rc == 0 and totals.get("roce", 0) > 0 and totals.get("icrc_ok") == totals.get("roce") \
            and totals.get("icrc_bad") == 0 and totals.get("malformed", 0) == 0
        print(f"capture of the tap: uroce decode exit {rc}, {totals} {err.strip()}", file=sys.stderr)
    finally:
        env.close()
        print(matrix.text())
    print(f"capture: {totals.get('roce', 0)} RoCE frames, {totals.get('icrc_ok', 0)} ICRC good, "
          f"{totals.get('icrc_bad', 0)} bad: {'pass' if icrc_ok else 'FAIL'}")
    print(f"uroce exec in the guest beside rxe: {exec_line}: {'pass' if exec_ok else 'FAIL'}")
    print(f"interop suite: {time.monotonic() - started:.0f} s")
    if args.repeat > 1:
        print(f"runs: {matrix.runs()}")
    failures = matrix.failures()
    if matrix.failed:
        # stderr, last: meson shows a failed test's stdout and then its
        # stderr, and its console keeps only the last 100 lines of that.
        print(f"--- why each failed run failed\n{matrix.failure_summary()}", file=sys.stderr)
    return 0 if not failures and icrc_ok and exec_ok else 1


if __name__ == "__main__":
    sys.exit(main())
