#!/usr/bin/env python3
"""`uroce explain` (docs/explain.md) against a running uroced: each kind of
remote access error that access_errors.c provokes produces exactly one
refusal record naming the right check, with the QPs, peer, address, rkey
and NAK, and the requester's error completion says the peer refused it;
`--follow` sees a record that happens after it started; a user other than
root and the daemon's sees none of root's records.

usage: test_explain.py UROCED UROCE DIR_OF_C_TESTS

Starts `uroced --port loopback --ip 192.0.2.1` (as root it makes
/dev/infiniband/uverbs_uroce0 itself). Exit 77 (skipped) when not root.
"""

import json
import os
import select
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_provider_daemon as provider  # noqa: E402

SKIP = 77
PEER = "192.0.2.1"
NAK_REMOTE_ACCESS = 2
WC_REM_ACCESS_ERR = 10
# The kind access_errors provokes -> the check the record must name.
KINDS = {
    "bad_rkey": "key_not_found",
    "stale_key": "key_byte_stale",
    "wrong_pd": "pd_mismatch",
    "no_remote_write": "no_remote_write",
    "no_remote_read": "no_remote_read",
    "no_remote_atomic": "no_remote_atomic",
    "out_of_range": "out_of_range",
    "relaxed_after_dereg": "relaxed_after_dereg",
}
NOBODY = 65534


class ExplainTests(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.d = provider.Daemon()

    @classmethod
    def tearDownClass(cls):
        cls.d.stop()

    def explain(self, *args, uid=None):
        r = subprocess.run([provider.UROCE, "explain", "--state-dir", self.d.state, "--json", *args],
                           capture_output=True, text=True, timeout=30,
                           preexec_fn=(lambda: os.setuid(uid)) if uid is not None else None)
        self.assertEqual(r.returncode, 0, r.stderr)
        return [json.loads(line) for line in r.stdout.splitlines() if line.strip()]

    def newest(self):
        records = self.explain()
        return records[-1]["seq"] if records else 0

    def provoke(self, kind):
        """Runs access_errors KIND; returns (requester QPN, responder QPN)."""
        r = self.d.run(os.path.join(provider.BIN, "access_errors"), kind)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        qps = [line.split() for line in r.stdout.splitlines() if line.startswith("qps ")]
        self.assertEqual(len(qps), 1, r.stdout)
        return int(qps[0][1]), int(qps[0][2])

    def check_kind(self, kind):
        before = self.newest()
        requester, responder = self.provoke(kind)
        new = [r for r in self.explain() if r["seq"] > before]
        refused = [r for r in new if r["kind"] == "request_refused"]
        self.assertEqual(len(refused), 1, json.dumps(new, indent=1))
        r = refused[0]
        self.assertEqual(r["check"], KINDS[kind], r["text"])
        self.assertEqual((r["qpn"], r["remote_qpn"], r["peer"]), (responder, requester, PEER), r["text"])
        self.assertEqual((r["nak"], r["wc_status"]), (NAK_REMOTE_ACCESS, WC_REM_ACCESS_ERR), r["text"])
        self.assertIn(kind != "bad_rkey" and "0x" or "key not found", r["text"])
        # The requester's side: its WQE completed in error because the peer refused.
        completions = [c for c in new if c["kind"] == "error_completion" and c["qpn"] == requester]
        self.assertEqual(len(completions), 1, json.dumps(new, indent=1))
        c = completions[0]
        self.assertEqual((c["check"], c["nak"], c["wc_status"], c["send_queue"], c["wr_id"]),
                         ("peer_nak", NAK_REMOTE_ACCESS, WC_REM_ACCESS_ERR, True, 0xE1), c["text"])
        self.assertEqual(c["rkey"], r["rkey"], c["text"])
        self.assertIn("peer refused: remote access error", c["text"])
        return r

    def test_bad_rkey(self):
        r = self.check_kind("bad_rkey")
        self.assertEqual(r["rkey"], 0xFFFFFE5A)
        self.assertIsNone(r["region"])

    def test_stale_key_byte(self):
        self.check_kind("stale_key")

    def test_wrong_pd(self):
        r = self.check_kind("wrong_pd")
        self.assertNotEqual(r["region"]["pd"], r["qp_pd"], r["text"])

    def test_no_remote_write(self):
        r = self.check_kind("no_remote_write")
        self.assertEqual(r["opcode_name"], "RC_RDMA_WRITE_ONLY")

    def test_no_remote_read(self):
        r = self.check_kind("no_remote_read")
        self.assertEqual(r["opcode_name"], "RC_RDMA_READ_REQUEST")

    def test_no_remote_atomic(self):
        r = self.check_kind("no_remote_atomic")
        self.assertEqual((r["opcode_name"], r["length"]), ("RC_FETCH_ADD", 8))

    def test_out_of_range(self):
        r = self.check_kind("out_of_range")
        self.assertEqual((r["overrun"], r["before_start"], r["length"]), (8, False, 16), r["text"])
        self.assertEqual(r["va"] + r["length"] - r["overrun"], r["region"]["start"] + r["region"]["length"])
        self.assertIn("out of range by 8 bytes", r["text"])

    def test_relaxed_after_dereg(self):
        r = self.check_kind("relaxed_after_dereg")
        self.assertIsNotNone(r["history"], r["text"])
        self.assertLessEqual(r["history"]["registered_ns"], r["history"]["deregistered_ns"])
        self.assertEqual(r["region"]["length"], 4096, r["text"])

    def test_follow_sees_a_new_record(self):
        proc = subprocess.Popen([provider.UROCE, "explain", "--state-dir", self.d.state, "--json", "--follow",
                                 "--new", "--count", "1", "--timeout", "60"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            # Wait (bounded) until it says it follows: what comes next is new.
            deadline = time.monotonic() + 30
            started = ""
            while "following after record" not in started and time.monotonic() < deadline:
                ready, _, _ = select.select([proc.stderr], [], [], deadline - time.monotonic())
                if not ready:
                    break
                line = proc.stderr.readline()
                if not line:
                    break
                started += line
            self.assertIn("following after record", started)
            requester, responder = self.provoke("bad_rkey")
            out, err = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        self.assertEqual(proc.returncode, 0, err)
        records = [json.loads(line) for line in out.splitlines() if line.strip()]
        self.assertEqual(len(records), 1, out)
        self.assertEqual((records[0]["check"], records[0]["qpn"]), ("key_not_found", responder))

    def test_other_users_see_none_of_roots_records(self):
        self.provoke("bad_rkey")
        mine = self.explain()
        self.assertTrue(mine and all(r["uid"] == 0 for r in mine), mine)
        os.chmod(self.d.state, 0o755)  # a temporary directory: only its owner could reach the socket
        self.assertEqual(self.explain(uid=NOBODY), [])

    def test_qp_filter(self):
        requester, responder = self.provoke("no_remote_write")
        only = self.explain("--qp", str(responder))
        self.assertTrue(only)
        self.assertEqual({r["qpn"] for r in only}, {responder})


def main():
    provider.UROCED, provider.UROCE, provider.BIN = sys.argv[1:4]
    del sys.argv[1:4]
    if os.geteuid() != 0:
        print("SKIP: needs root (the daemon makes /dev/infiniband/uverbs_uroce0; the uid test switches users)")
        return SKIP
    prog = unittest.main(exit=False, verbosity=2)
    return 0 if prog.result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main())
