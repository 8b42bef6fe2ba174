#!/usr/bin/env python3
"""Issue 10 item 1: an unprivileged client must not reach a setuid-root
program's memory through a connection it opened before exec'ing it
(docs/security.md).

usage: test_exec_attack.py UROCED UROCE EXEC_ATTACK SETUID_TARGET

The test (root) starts one uroced on the loopback port, installs a copy of
SETUID_TARGET owned by root with mode 4755 in a fresh directory, and runs
EXEC_ATTACK as the unprivileged user `nobody`: it opens the device, forks,
the parent execs the setuid target (same pid, now euid 0), and the child,
through the old connection, registers an MR over the target's stack buffer
and RDMA WRITEs into it from a QP of its own. Passes when the target really
ran as root, the registration (or else the write) failed, the target's
buffer is intact, and the daemon ended the old connection because its
process exec'ed. Exit 77 (skipped), with the reason, without root or the
`nobody` user.
"""

import os
import pwd
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import uroce_harness as harness  # noqa: E402

UNPRIVILEGED = "nobody"
RUN_TIMEOUT = 60


def skip_reason():
    if os.geteuid() != 0:
        return "needs root (a setuid-root target, an unprivileged user, the device node)"
    try:
        pwd.getpwnam(UNPRIVILEGED)
    except KeyError:
        return f"no user {UNPRIVILEGED!r} to attack as"
    missing = harness.missing_tools(["setpriv", "stdbuf"])
    if missing:
        return f"not installed: {', '.join(missing)}"
    return None


class ExecSetuidAttack(unittest.TestCase):
    uroced = uroce = attack = target = None

    def setUp(self):
        self.user = pwd.getpwnam(UNPRIVILEGED)
        self.daemon = harness.Daemon(self.uroced, self.uroce, name="uroce_sec", ip="192.0.2.7")
        self.addCleanup(self.daemon.close)
        # The unprivileged user must reach the socket and the device tree.
        os.chmod(self.daemon.state, 0o755)
        # The setuid copy, in a directory of its own on a filesystem that
        # honours setuid (the build tree's, if the temporary one is nosuid).
        self.dir = tempfile.mkdtemp(prefix="uroce-setuid-")
        if self.nosuid(self.dir):
            shutil.rmtree(self.dir)
            self.dir = tempfile.mkdtemp(prefix="uroce-setuid-", dir=os.path.dirname(os.path.abspath(self.target)))
        self.addCleanup(shutil.rmtree, self.dir, True)
        os.chmod(self.dir, 0o755)
        self.setuid_target = os.path.join(self.dir, "setuid_target")
        shutil.copy(self.target, self.setuid_target)
        os.chown(self.setuid_target, 0, 0)
        os.chmod(self.setuid_target, 0o4755)
        self.attack_copy = os.path.join(self.dir, "exec_attack")
        shutil.copy(self.attack, self.attack_copy)
        os.chmod(self.attack_copy, 0o755)

    @staticmethod
    def nosuid(path):
        return bool(os.statvfs(path).f_flag & os.ST_NOSUID)

    def run_attack(self):
        argv = ["setpriv", f"--reuid={self.user.pw_uid}", f"--regid={self.user.pw_gid}", "--clear-groups", "--",
                *self.daemon.exec_argv(self.attack_copy, self.daemon.name, str(self.daemon.gid_index()),
                                       self.setuid_target)]
        r = subprocess.run(argv, capture_output=True, text=True, timeout=RUN_TIMEOUT, cwd=self.dir)
        return r, r.stdout + r.stderr

    def test_the_old_connection_reaches_nothing_of_the_setuid_program(self):
        r, out = self.run_attack()
        print(f"--- attack output\n{out}", flush=True)
        context = f"\n--- attack output\n{out}\n--- uroced log\n{harness.tail(self.daemon.log_text(), 30)}"
        # The process `uroce exec` waits for is the one that became the
        # target: its status is the target's verdict (0 intact, 3 changed).
        self.assertEqual(r.returncode, 0, "the target's buffer is intact" + context)
        target = re.search(r"(?m)^TARGET pid (\d+) \(the attacker's parent was (\d+)\) euid (\d+)$", out)
        self.assertIsNotNone(target, context)
        self.assertEqual(target.group(1), target.group(2), "the target kept the attacker's pid" + context)
        self.assertEqual(target.group(3), "0", "the target ran setuid root" + context)
        registered = re.search(r"(?m)^REG_MR ok", out) is not None
        if registered:
            # Even if a registration got through, no byte may have landed.
            self.assertNotRegex(out, r"WRITE completed with status 0 ", context)
        self.assertFalse(registered, "no MR over the setuid program's memory" + context)
        self.assertRegex(out, r"(?m)^VERDICT INTACT$", "the root process's memory is unchanged" + context)
        self.assertRegex(self.daemon.log_text(), r"its process exec'ed or exited",
                         "the daemon ended the connection of the exec'ed process" + context)
        self.assertTrue(self.daemon.alive(), context)


def main():
    if len(sys.argv) != 5:
        print(__doc__, file=sys.stderr)
        return 2
    paths = [os.path.abspath(p) for p in sys.argv[1:]]
    ExecSetuidAttack.uroced, ExecSetuidAttack.uroce, ExecSetuidAttack.attack, ExecSetuidAttack.target = paths
    reason = skip_reason()
    if reason:
        print(f"SKIP: {reason}")
        return harness.SKIP
    result = unittest.main(argv=[sys.argv[0], "-v"], exit=False).result
    return 0 if result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main())
