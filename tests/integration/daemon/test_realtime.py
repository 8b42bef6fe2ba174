#!/usr/bin/env python3
"""uroced --realtime-priority (docs/daemon.md "Real-time priority"): the loop
thread runs SCHED_FIFO at the asked priority (1 without the flag) with
RLIMIT_RTTIME's soft limit at the busy budget; where SCHED_FIFO is refused (no
CAP_SYS_NICE, RLIMIT_RTPRIO 0) it serves as SCHED_OTHER, with a warning when
the priority was asked for and an info line when it was the default;
--realtime-priority 0 keeps it SCHED_OTHER.

usage: test_realtime.py UROCED UROCE
"""

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import unittest

UROCED = UROCE = None
BUSY_BUDGET_US = 20000  # RealtimeClass::kBusyBudget


@unittest.skipUnless(os.geteuid() == 0, "needs root (CAP_SYS_NICE) to take SCHED_FIFO")
class RealtimeTests(unittest.TestCase):
    def start(self, flags, wrapper=()):
        self.tmp = tempfile.TemporaryDirectory(prefix="uroce-rt-")
        self.addCleanup(self.tmp.cleanup)
        name = f"uroce_rt{os.getpid()}"
        self.log = open(os.path.join(self.tmp.name, "uroced.log"), "w+")
        self.addCleanup(self.log.close)
        proc = subprocess.Popen([*wrapper, UROCED, "--port", "loopback", "--ip", "192.0.2.9", "--name", name,
                                 "--state-dir", self.tmp.name, *flags], stderr=self.log)
        self.addCleanup(self.stop, proc)
        r = subprocess.run([UROCE, "status", "--state-dir", self.tmp.name, "--device", name, "--wait", "60"],
                           capture_output=True, text=True, timeout=90)
        self.assertEqual(r.returncode, 0, r.stderr + self.log_text())
        return proc

    def stop(self, proc):
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    def log_text(self):
        self.log.flush()
        self.log.seek(0)
        return self.log.read()

    def test_loop_thread_runs_sched_fifo_with_a_busy_budget(self):
        proc = self.start(["--realtime-priority", "3"])
        # The loop runs on the main thread (the loopback port starts no EAL).
        self.assertEqual(os.sched_getscheduler(proc.pid), os.SCHED_FIFO, self.log_text())
        self.assertEqual(os.sched_getparam(proc.pid).sched_priority, 3)
        with open(f"/proc/{proc.pid}/limits") as f:
            rttime = re.search(r"(?m)^Max realtime timeout\s+(\S+)\s+(\S+)", f.read())
        self.assertEqual(rttime.group(1), str(BUSY_BUDGET_US))
        self.assertIn("SCHED_FIFO priority 3", self.log_text())

    def test_refused_realtime_falls_back_to_sched_other(self):
        setpriv, prlimit = shutil.which("setpriv"), shutil.which("prlimit")
        if not (setpriv and prlimit):
            self.skipTest("needs setpriv and prlimit (util-linux) to drop CAP_SYS_NICE")
        wrapper = [prlimit, "--rtprio=0", setpriv, "--bounding-set=-sys_nice", "--inh-caps=-sys_nice", "--"]
        proc = self.start(["--realtime-priority", "3"], wrapper)
        self.assertEqual(os.sched_getscheduler(proc.pid), os.SCHED_OTHER)
        self.assertRegex(self.log_text(), r"SCHED_FIFO priority 3 refused: .*staying SCHED_OTHER")

    def test_without_the_flag_takes_sched_fifo_priority_1(self):
        proc = self.start([])
        self.assertEqual(os.sched_getscheduler(proc.pid), os.SCHED_FIFO, self.log_text())
        self.assertEqual(os.sched_getparam(proc.pid).sched_priority, 1)
        self.assertIn("SCHED_FIFO priority 1", self.log_text())

    def test_priority_0_stays_sched_other(self):
        proc = self.start(["--realtime-priority", "0"])
        self.assertEqual(os.sched_getscheduler(proc.pid), os.SCHED_OTHER)
        self.assertNotIn("SCHED_FIFO", self.log_text())

    def test_refused_default_is_said_without_a_warning(self):
        # An unprivileged daemon cannot take SCHED_FIFO: that is normal, not
        # a problem to warn about; the log still says how the loop runs.
        setpriv, prlimit = shutil.which("setpriv"), shutil.which("prlimit")
        if not (setpriv and prlimit):
            self.skipTest("needs setpriv and prlimit (util-linux) to drop CAP_SYS_NICE")
        wrapper = [prlimit, "--rtprio=0", setpriv, "--bounding-set=-sys_nice", "--inh-caps=-sys_nice", "--"]
        proc = self.start([], wrapper)
        self.assertEqual(os.sched_getscheduler(proc.pid), os.SCHED_OTHER)
        log = self.log_text()
        self.assertRegex(log, r"info: loop thread: SCHED_FIFO priority 1 refused: .*staying SCHED_OTHER")
        self.assertNotIn("warning", log)

if __name__ == "__main__":
    UROCED, UROCE = (os.path.abspath(p) for p in sys.argv[1:3])
    del sys.argv[1:3]
    unittest.main(verbosity=2)
