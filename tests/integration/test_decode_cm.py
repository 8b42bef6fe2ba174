"""`uroce decode` on CM MADs: a capture of every CM message in a QP1 frame,
written by the CM builders (tests/fuzz/make_cm_seeds.cc --pcap), decoded by
the real tool; when tshark is installed, its InfiniBand dissector must read
the same messages and fields (an independent check of the bit layout).

usage: test_decode_cm.py UROCE_BINARY CAPTURE
"""

import json
import shutil
import subprocess
import sys
import unittest

UROCE = None
CAPTURE = None

MESSAGES = ["REQ", "REP", "RTU", "DREQ", "DREP", "REJ", "MRA", "SIDR_REQ", "SIDR_REP", "REQ"]
COMM_ID = 0x9B3C0E21
TID = "0x000000029b3c0e21"


def decode(*extra):
    return subprocess.run([UROCE, "decode", CAPTURE, *extra], capture_output=True, text=True, timeout=60)


class UroceDecode(unittest.TestCase):
    def test_names_every_message_and_its_main_fields(self):
        r = decode("--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = [json.loads(line) for line in r.stdout.splitlines()]
        frames, totals = lines[:-1], lines[-1]
        self.assertEqual(totals["icrc_ok"], len(MESSAGES))
        self.assertEqual([f["cm"]["message"] for f in frames], MESSAGES)
        for f in frames:
            self.assertEqual(f["opcode_name"], "UD_SEND_ONLY")
            self.assertEqual(f["dest_qp"], 1)
            self.assertEqual(f["deth"]["qkey"], 0x80010000)
            self.assertEqual(f["cm"]["status"], "ok")
            self.assertEqual(f["cm"]["tid"], TID)
        req, rep, rtu, dreq = frames[0]["cm"], frames[1]["cm"], frames[2]["cm"], frames[3]["cm"]
        self.assertEqual(req["local_comm_id"], COMM_ID)
        self.assertEqual(req["service_id"], "0x0000000001061c06")
        self.assertEqual(req["qpn"], 0x11)
        self.assertEqual(req["starting_psn"], 0x5E7B1)
        self.assertNotIn("remote_comm_id", req)
        self.assertEqual(rep["remote_comm_id"], COMM_ID)
        self.assertEqual(rep["qpn"], 0x12)
        self.assertEqual(rep["starting_psn"], 0xABCDE)
        self.assertEqual(rtu["local_comm_id"], COMM_ID)
        self.assertEqual(dreq["qpn"], 0x12)
        self.assertEqual(frames[5]["cm"]["reject_reason"], 8)
        self.assertEqual(frames[8]["cm"]["sidr_status"], 0)
        self.assertEqual(frames[9]["ip_version"], 6)

    def test_text_line(self):
        r = decode()
        self.assertEqual(r.returncode, 0, r.stderr)
        first = r.stdout.splitlines()[0]
        self.assertIn("UD_SEND_ONLY", first)
        self.assertIn(f"CM REQ tid={TID} local_comm_id=0x9b3c0e21 service_id=0x0000000001061c06 qpn=0x11 "
                      "psn=0x5e7b1", first)


class Tshark(unittest.TestCase):
    FIELDS = ["_ws.col.Info", "infiniband.mad.attributeid", "infiniband.mad.transactionid",
              "infiniband.cm.req.serviceid", "infiniband.cm.req.localqpn", "infiniband.cm.req.startpsn",
              "infiniband.cm.req.prim_localacktout", "infiniband.cm.req.ip_cm.sport",
              "infiniband.cm.rep.localqpn", "infiniband.cm.rep.startpsn", "infiniband.cm.rej.reason",
              "infiniband.cm.rtu.localcommid"]

    def test_tshark_reads_the_same_messages(self):
        tshark = shutil.which("tshark")
        if tshark is None:
            self.skipTest("tshark is not installed")
        cmd = [tshark, "-r", CAPTURE, "-d", "udp.port==4791,infiniband", "-T", "fields", "-E", "separator=|"]
        for f in self.FIELDS:
            cmd += ["-e", f]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        rows = [dict(zip(self.FIELDS, line.split("|"))) for line in r.stdout.splitlines()]
        self.assertEqual([row["infiniband.mad.attributeid"] for row in rows],
                         ["0x0010", "0x0013", "0x0014", "0x0015", "0x0016", "0x0012", "0x0011", "0x0017",
                          "0x0018", "0x0010"])
        for row in rows:
            self.assertTrue(row["_ws.col.Info"].startswith("CM: "), row)
            self.assertEqual(row["infiniband.mad.transactionid"], TID)
        req, rep = rows[0], rows[1]
        self.assertEqual(req["infiniband.cm.req.serviceid"], "0x0000000001061c06")
        self.assertEqual(req["infiniband.cm.req.localqpn"], "0x000011")
        self.assertEqual(req["infiniband.cm.req.startpsn"], "0x05e7b1")
        self.assertEqual(req["infiniband.cm.req.prim_localacktout"], "0x13")
        self.assertEqual(req["infiniband.cm.req.ip_cm.sport"], "0x8bd3")
        self.assertEqual(rep["infiniband.cm.rep.localqpn"], "0x000012")
        self.assertEqual(rep["infiniband.cm.rep.startpsn"], "0x0abcde")
        self.assertEqual(rows[2]["infiniband.cm.rtu.localcommid"], "0x9b3c0e21")
        self.assertEqual(rows[5]["infiniband.cm.rej.reason"], "0x0008")


if __name__ == "__main__":
    UROCE, CAPTURE = sys.argv[1], sys.argv[2]
    unittest.main(argv=[sys.argv[0], "-v"])
