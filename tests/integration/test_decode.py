"""Integration tests of `uroce decode`: the real tool over the rdma_rxe
captures and over hand-made captures mixing good, corrupt, truncated and
non-RoCE frames. When tshark is installed, every field the tool prints is
compared with tshark's InfiniBand dissector.

usage: test_decode.py UROCE_BINARY DATA_DIR
"""

import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import unittest

import pcap_util

UROCE = None
CAPTURES = None


def decode(path, *extra):
    return subprocess.run([UROCE, "decode", path, *extra], capture_output=True, text=True, timeout=120)


def decode_json(path):
    r = decode(path, "--json")
    lines = [json.loads(line) for line in r.stdout.splitlines()]
    return r.returncode, lines[:-1], lines[-1]


def capture_files():
    return sorted(os.path.join(CAPTURES, f) for f in os.listdir(CAPTURES) if f.endswith(".pcap"))


def ip_checksum(hdr):
    s = sum(struct.unpack("!10H", hdr))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return (~s) & 0xFFFF


def with_ipv4_checksum(frame):
    """Recompute the IPv4 header checksum of an untagged Ethernet frame."""
    f = bytearray(frame)
    f[24:26] = b"\0\0"
    f[24:26] = struct.pack("!H", ip_checksum(bytes(f[14:34])))
    return bytes(f)


class CaptureTests(unittest.TestCase):
    def test_every_capture_frame_decodes_with_good_icrc(self):
        for path in capture_files():
            with self.subTest(capture=os.path.basename(path)):
                n = len(pcap_util.read_frames(path))
                r = decode(path)
                self.assertEqual(r.returncode, 0, r.stderr)
                lines = r.stdout.splitlines()
                self.assertEqual(lines[-1], f"{n} frames, {n} roce, {n} icrc ok, 0 icrc bad")
                self.assertEqual(len(lines), n + 1)
                for i, line in enumerate(lines[:-1], start=1):
                    self.assertTrue(line.startswith(f"{i} "), line)
                    self.assertTrue(line.endswith(" icrc=ok"), line)

    def test_json_lines_carry_the_same_totals(self):
        path = os.path.join(CAPTURES, "read_bw.pcap")
        rc, frames, totals = decode_json(path)
        self.assertEqual(rc, 0)
        self.assertEqual(totals, {"frames": len(frames), "roce": len(frames), "icrc_ok": len(frames),
                                  "icrc_bad": 0, "malformed": 0})
        names = {f["opcode_name"] for f in frames}
        self.assertEqual(names, {"RC_RDMA_READ_REQUEST", "RC_RDMA_READ_RESPONSE_FIRST",
                                 "RC_RDMA_READ_RESPONSE_MIDDLE", "RC_RDMA_READ_RESPONSE_LAST"})


class MixedCaptureTests(unittest.TestCase):
    """A capture mixing non-RoCE frames, malformed RoCE frames and bad ICRCs."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="uroce-decode-")
        good = pcap_util.read_frames(os.path.join(CAPTURES, "write_lat_small.pcap"))[0]
        cls.good = good
        arp = bytes(6 * [0xFF]) + good[6:12] + b"\x08\x06" + bytes(28)
        tcp = bytearray(good[:54])
        tcp[23] = 6  # IP protocol TCP
        tcp[16:18] = struct.pack("!H", 40)
        tcp = with_ipv4_checksum(bytes(tcp))
        dns = bytearray(good)
        dns[36:38] = struct.pack("!H", 53)  # UDP destination port
        corrupt_payload = bytearray(good)
        corrupt_payload[-5] ^= 0x40  # last payload/pad byte before the ICRC
        corrupt_icrc = bytearray(good)
        corrupt_icrc[-1] ^= 0xFF
        truncated_bth = good[:14 + 20 + 8 + 6]
        ip_total_too_long = bytearray(good)
        cls.frames = [good, arp, tcp, bytes(dns), bytes(corrupt_payload), bytes(corrupt_icrc), truncated_bth,
                      bytes(ip_total_too_long[:40])]
        cls.path = os.path.join(cls.tmp, "mixed.pcap")
        pcap_util.write_pcap(cls.path, cls.frames)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp)

    def test_text_report(self):
        r = decode(self.path)
        self.assertEqual(r.returncode, 1, "a bad ICRC must make the exit status non-zero")
        lines = r.stdout.splitlines()
        self.assertEqual(len(lines), len(self.frames) + 1)
        self.assertTrue(lines[0].endswith("icrc=ok"), lines[0])
        self.assertRegex(lines[1], r"^2 skipped: not_roce_ethertype ")
        self.assertRegex(lines[2], r"^3 skipped: not_roce_ip_protocol ")
        self.assertRegex(lines[3], r"^4 skipped: not_roce_port ")
        carried = self.good[-4:].hex()
        bad_icrc = bytearray(self.good[-4:])
        bad_icrc[-1] ^= 0xFF
        self.assertRegex(lines[4], r"icrc=BAD\(expected 0x[0-9a-f]{8} got 0x" + carried + r"\)$")
        self.assertTrue(lines[5].endswith(f"icrc=BAD(expected 0x{carried} got 0x{bytes(bad_icrc).hex()})"),
                        lines[5])
        # Cut inside the BTH: UDP to port 4791, so a malformed RoCE frame.
        self.assertRegex(lines[6], r"^7 dropped: ipv4_bad_length ")
        # Cut inside the UDP header: nobody can tell whose it was.
        self.assertRegex(lines[7], r"^8 skipped: udp_truncated ")
        self.assertEqual(lines[-1], "8 frames, 4 roce, 1 icrc ok, 2 icrc bad")

    def test_json_report(self):
        rc, frames, totals = decode_json(self.path)
        self.assertEqual(rc, 1)
        self.assertEqual([f["status"] for f in frames],
                         ["roce", "skipped", "skipped", "skipped", "roce", "roce", "dropped", "skipped"])
        self.assertFalse(frames[4]["icrc"]["ok"])
        self.assertEqual(frames[5]["icrc"]["expected"], "0x" + self.good[-4:].hex())
        self.assertEqual(totals, {"frames": 8, "roce": 4, "icrc_ok": 1, "icrc_bad": 2, "malformed": 1})


class ErrorTests(unittest.TestCase):
    def test_missing_file(self):
        r = decode("/nonexistent/x.pcap")
        self.assertEqual(r.returncode, 2)
        self.assertIn("No such file", r.stderr)

    def test_not_ethernet(self):
        with tempfile.TemporaryDirectory() as d:
            p = os.path.join(d, "raw.pcap")
            pcap_util.write_pcap(p, [b"\x45" + bytes(40)], linktype=101)
            r = decode(p)
            self.assertEqual(r.returncode, 2)
            self.assertIn("is not Ethernet", r.stderr)

    def test_garbage_file(self):
        with tempfile.NamedTemporaryFile(suffix=".pcap") as f:
            f.write(os.urandom(4096))
            f.flush()
            r = decode(f.name)
            self.assertEqual(r.returncode, 2)
            self.assertTrue(r.stderr.startswith("uroce decode: "), r.stderr)

    def test_cut_capture(self):
        with tempfile.TemporaryDirectory() as d:
            good = pcap_util.read_frames(os.path.join(CAPTURES, "rc_pingpong.pcap"))[0]
            p = os.path.join(d, "cut.pcap")
            pcap_util.write_pcap(p, [good[:100]], original_lengths=[len(good)])
            r = decode(p)
            self.assertEqual(r.returncode, 1)
            self.assertIn(f"[capture cut at 100 of {len(good)} bytes]", r.stdout)


# tshark fields compared with ours: (tshark field, function of our JSON frame).
def _hexstr(v):
    return None if v is None else int(v, 16)


TSHARK_FIELDS = [
    ("ip.src", lambda f: f["ip_src"]),
    ("ip.dst", lambda f: f["ip_dst"]),
    ("udp.srcport", lambda f: f["udp_src_port"]),
    ("udp.dstport", lambda f: f["udp_dst_port"]),
    ("infiniband.bth.opcode", lambda f: f["opcode"]),
    ("infiniband.bth.se", lambda f: int(f["se"])),
    ("infiniband.bth.m", lambda f: int(f["mig_req"])),
    ("infiniband.bth.padcnt", lambda f: f["pad"]),
    ("infiniband.bth.tver", lambda f: f["tver"]),
    ("infiniband.bth.p_key", lambda f: f["pkey"]),
    ("infiniband.bth.destqp", lambda f: f["dest_qp"]),
    ("infiniband.bth.a", lambda f: int(f["ack_req"])),
    ("infiniband.bth.psn", lambda f: f["psn"]),
    # tshark shows the AtomicETH address and key through the RETH fields.
    ("infiniband.reth.va", lambda f: _hexstr((f.get("reth") or f.get("atomiceth") or {}).get("va"))),
    ("infiniband.reth.r_key", lambda f: (f.get("reth") or f.get("atomiceth") or {}).get("rkey")),
    ("infiniband.reth.dmalen", lambda f: f.get("reth", {}).get("dma_length")),
    ("infiniband.atomiceth.swapdt", lambda f: _hexstr(f.get("atomiceth", {}).get("swap_add"))),
    ("infiniband.atomiceth.cmpdt", lambda f: _hexstr(f.get("atomiceth", {}).get("compare"))),
    ("infiniband.aeth.syndrome", lambda f: f.get("aeth", {}).get("syndrome")),
    ("infiniband.aeth.msn", lambda f: f.get("aeth", {}).get("msn")),
    ("infiniband.atomicacketh.origremdt", lambda f: _hexstr(f.get("atomicacketh", {}).get("original"))),
    ("infiniband.deth.q_key", lambda f: f.get("deth", {}).get("qkey")),
    ("infiniband.deth.srcqp", lambda f: f.get("deth", {}).get("src_qp")),
    ("infiniband.immdt", lambda f: f.get("immdt")),
    ("infiniband.ieth", lambda f: f.get("ieth", {}).get("rkey")),
    ("infiniband.invariant.crc", lambda f: int(f["icrc"]["carried"], 16)),
    # tshark's data field runs to the ICRC, so it includes the pad bytes.
    ("data.len", lambda f: (f["payload_length"] + f["pad"]) or None),
]


def tshark_value(text):
    if text == "":
        return None
    if text in ("True", "False"):
        return int(text == "True")
    for conv in (lambda t: int(t, 0), int):
        try:
            return conv(text)
        except ValueError:
            pass
    if all(c in "0123456789abcdef:" for c in text) and len(text.replace(":", "")) % 2 == 0:
        return int(text.replace(":", ""), 16)  # FT_BYTES fields
    return text


@unittest.skipIf(shutil.which("tshark") is None, "tshark is not installed (apt-get install tshark)")
class TsharkAgreementTests(unittest.TestCase):
    def test_fields_agree_with_tshark(self):
        names = [n for n, _ in TSHARK_FIELDS]
        for path in capture_files():
            with self.subTest(capture=os.path.basename(path)):
                cmd = ["tshark", "-r", path, "-d", "udp.port==4791,infiniband", "-T", "fields",
                       "-E", "separator=\t", "-E", "occurrence=f"]
                for n in names:
                    cmd += ["-e", n]
                out = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=True).stdout
                theirs = [line.split("\t") for line in out.splitlines()]
                _, ours, _ = decode_json(path)
                self.assertEqual(len(theirs), len(ours))
                for row, frame in zip(theirs, ours):
                    for (name, get), text in zip(TSHARK_FIELDS, row):
                        self.assertEqual(get(frame), tshark_value(text),
                                         f"frame {frame['index']} field {name}: ours {get(frame)!r}, "
                                         f"tshark {text!r}")


if __name__ == "__main__":
    UROCE, CAPTURES = sys.argv[1], sys.argv[2]
    unittest.main(argv=[sys.argv[0], "-v"])
