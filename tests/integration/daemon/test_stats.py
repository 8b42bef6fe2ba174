#!/usr/bin/env python3
"""`uroce stats` against a uroced on the loopback port.

usage: test_stats.py --part control|verbs UROCED UROCE

control: a raw client of the control socket registers MRs with and without a
shared memfd (UROCE_REG_SHARED) and checks, through `uroce stats --json` and
LIST_MRS, which way serves each MR, that DEREG_MR and REREG_MR drop the
shared-mapping reference the MR held, and that listings page through many
MRs in key order, and that the membership group (MEMBERSHIP) names every
counter; and the loop_stalls group (LOOP_STALLS) of a daemon
started with --stall-ms. Needs no privileges.

verbs: stock ibv_rc_pingpong through the daemon; while the server waits for
its peer its MR shows way 'shared' (and 'copy' with UROCE_SHARE_MEMORY=0 in
the programs' environment), and after the run the engine, frame, port and DMA
counters show the traffic went that way. Needs root (the /dev/infiniband node
libibverbs opens); reports itself skipped (77) otherwise.
"""

import argparse
import ctypes
import fcntl
import json
import mmap
import os
import struct
import subprocess
import sys
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, ".."))
import uroce_harness as harness  # noqa: E402
from uroce_control import DEREG_MR, REG_MR, REREG_MR, Client  # noqa: E402

UROCED = UROCE = None
DEVICE = "uroce_stats"
STATS, LIST_MRS = 28, 29
LIST_MRS_PER_REPLY = 8
REG_HAS_IOVA, REG_DMABUF, REG_SHARED = 0x1, 0x2, 0x4
EINVAL, EOPNOTSUPP = 22, 95
REREG_CHANGE_TRANSLATION = 0x1
LOCAL_WRITE = 1
PAGE = mmap.PAGESIZE
F_ADD_SEALS, F_SEAL_SHRINK = 1033, 0x0002  # fcntl.h
MR_ENTRY = struct.Struct("<4IQQB7x")       # uroce_ctrl_mr_entry


def address_of(m):
    return ctypes.addressof(ctypes.c_char.from_buffer(m))


class SharedMemory:
    """What the provider makes for a registration it shares: a memfd sealed
    against shrinking, mapped MAP_SHARED in this process."""

    def __init__(self, pages):
        self.length = pages * PAGE
        self.fd = os.memfd_create("uroce-stats-test", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
        os.ftruncate(self.fd, self.length)
        fcntl.fcntl(self.fd, F_ADD_SEALS, F_SEAL_SHRINK)
        self.map = mmap.mmap(self.fd, self.length, flags=mmap.MAP_SHARED)
        self.addr = address_of(self.map)

    def close(self):
        os.close(self.fd)


def private_pages(pages):
    """Private anonymous memory: the copying way is the only one for it."""
    m = mmap.mmap(-1, pages * PAGE, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    return m, address_of(m)


def reg_body(pd, addr, length, *, flags=0, rereg_flags=0, lkey=0, shared=None):
    # uroce_ctrl_reg_mr after the header: pd, access, addr, length, iova,
    # flags, rereg_flags, lkey, reserved, shared_addr, shared_length, shared_offset.
    if shared is not None:
        flags |= REG_SHARED
    return struct.pack("<IIQQQIIIIQQQ", pd, LOCAL_WRITE, addr, length, 0, flags, rereg_flags, lkey, 0,
                       shared.addr if shared else 0, shared.length if shared else 0, 0)


def assert_reasons_add_up(test, s):
    """The by-reason groups (STATS_REASONS) name every drop and add up to the totals."""
    test.assertIn("bad_icrc", s["frames_malformed"])
    test.assertIn("unknown_qp", s["engine_dropped"])
    test.assertIn("receiver_not_ready", s["naks_sent"])
    test.assertIn("psn_sequence_error", s["naks_received"])
    test.assertNotIn("ok", s["frames_malformed"])
    test.assertEqual(sum(s["frames_malformed"].values()), s["frames"]["rx_malformed"])
    test.assertEqual(sum(s["engine_dropped"].values()), s["engine"]["rx_dropped"])
    test.assertEqual(s["naks_sent"]["receiver_not_ready"], s["engine"]["rnr_naks_sent"])
    test.assertEqual(s["naks_sent"]["psn_sequence_error"], s["engine"]["seq_naks_sent"])


def stats_json(state):
    r = subprocess.run([UROCE, "stats", "--state-dir", state, "--device", DEVICE, "--json"], capture_output=True,
                       text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


class LoopStallsGroup(unittest.TestCase):
    """LOOP_STALLS: the group carries the daemon's --stall-ms and counts its
    loop's rounds, every cause and phase named (docs/stats.md)."""

    def test_threshold_rounds_and_names(self):
        d = harness.Daemon(UROCED, UROCE, name=DEVICE, ip="192.0.2.1", extra=("--stall-ms", "250"))
        try:
            first = stats_json(d.state)["loop_stalls"]
            self.assertEqual(first["threshold_ns"], 250_000_000)
            for name in ("cause_cpu_wait", "cause_on_cpu", "cause_asked_sleep", "cause_off_cpu", "phase_data_path",
                         "phase_control", "phase_housekeeping", "phase_spin", "phase_sleep", "rounds_over_1s"):
                self.assertIn(name, first)
            # Each stall has exactly one cause and one phase.
            self.assertEqual(sum(v for k, v in first.items() if k.startswith("cause_")), first["stalls"])
            self.assertEqual(sum(v for k, v in first.items() if k.startswith("phase_")), first["stalls"])
            # An idle loop still goes round (sleeps of at most 10 ms).
            deadline = time.monotonic() + 10
            while stats_json(d.state)["loop_stalls"]["rounds"] <= first["rounds"] and time.monotonic() < deadline:
                time.sleep(0.05)
            self.assertGreater(stats_json(d.state)["loop_stalls"]["rounds"], first["rounds"])
        finally:
            d.close()


class ControlPart(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.d = harness.Daemon(UROCED, UROCE, name=DEVICE, ip="192.0.2.1")

    @classmethod
    def tearDownClass(cls):
        cls.d.close()

    def setUp(self):
        self.c = Client(os.path.join(self.d.state, DEVICE + ".sock"))
        status, self.client_id, fds = self.c.hello()
        self.assertEqual(status, 0)
        for fd in fds:
            os.close(fd)
        status, self.pd = self.c.alloc_pd()
        self.assertEqual(status, 0)
        self.memories = []

    def tearDown(self):
        self.c.close()
        for m in self.memories:
            m.close()
        # The client's MRs and mappings go with its connection.
        deadline = time.monotonic() + 20
        while True:
            s = self.stats()
            if not s["mrs"] and s["dma"]["shared_mappings"] == 0:
                break
            self.assertLess(time.monotonic(), deadline, f"the closed client's MRs stay: {s['mrs']}")
            time.sleep(0.01)

    def stats(self):
        return stats_json(self.d.state)

    def shared(self, pages=2):
        m = SharedMemory(pages)
        self.memories.append(m)
        return m

    def reg(self, addr, length, shared=None):
        status, body, _ = self.c.call(REG_MR, reg_body(self.pd, addr, length, shared=shared))
        self.assertEqual(status, 0)
        return struct.unpack_from("<I", body)[0]

    def rereg(self, lkey, addr, length, shared=None):
        status, _, _ = self.c.call(REREG_MR, reg_body(self.pd, addr, length, rereg_flags=REREG_CHANGE_TRANSLATION,
                                                      lkey=lkey, shared=shared), [shared.fd] if shared else None)
        self.assertEqual(status, 0)

    def reg_shared(self, m, offset=0, length=None):
        status, body, _ = self.c.call(REG_MR, reg_body(self.pd, m.addr + offset, length or m.length, shared=m),
                                      [m.fd])
        self.assertEqual(status, 0)
        return struct.unpack_from("<I", body)[0]

    def ways(self):
        """{lkey: way} of this client's MRs, and the shared mappings held."""
        s = self.stats()
        return {m["lkey"]: m["way"] for m in s["mrs"] if m["client"] == self.client_id}, s["dma"]["shared_mappings"]

    def test_drops_and_naks_by_reason_add_up_to_the_totals(self):
        assert_reasons_add_up(self, self.stats())

    def test_membership_group_names_every_counter(self):
        """MEMBERSHIP (op 152): a loopback port has no link to tell, so no
        report goes and the versions stay the newest (docs/stats.md)."""
        m = self.stats()["membership"]
        self.assertEqual(list(m), ["reports_sent", "leaves_sent", "queries", "queries_answered", "older_queries",
                                   "queries_dropped", "dropped_length", "dropped_checksum", "dropped_hop_limit",
                                   "dropped_fragment", "dropped_source", "dropped_group", "tx_refused", "groups",
                                   "igmp_version", "mld_version"])
        self.assertEqual((m["igmp_version"], m["mld_version"]), (3, 2))
        self.assertEqual(m["reports_sent"], 0)
        self.assertEqual(sum(v for k, v in m.items() if k.startswith("dropped_")), m["queries_dropped"])

    def test_each_mr_shows_its_way_and_its_registration(self):
        m = self.shared()
        private, paddr = private_pages(1)
        shared_key = self.reg_shared(m)
        copy_key = self.reg(paddr, PAGE)
        s = self.stats()
        mine = {e["lkey"]: e for e in s["mrs"]}
        self.assertEqual(set(mine), {shared_key, copy_key})
        self.assertEqual((mine[shared_key]["way"], mine[copy_key]["way"]), ("shared", "copy"))
        self.assertEqual((mine[shared_key]["addr"], mine[shared_key]["length"]), (m.addr, m.length))
        self.assertEqual((mine[copy_key]["addr"], mine[copy_key]["length"]), (paddr, PAGE))
        for e in mine.values():
            self.assertEqual((e["pd"], e["client"], e["access"]), (self.pd, self.client_id, LOCAL_WRITE))
        self.assertEqual(s["mr_ways"], {"shared": 1, "copy": 1, "unserved": 0})
        self.assertEqual(s["dma"]["shared_mappings"], 1)
        # The text form has the same table.
        r = subprocess.run([UROCE, "stats", "--state-dir", self.d.state, "--device", DEVICE], capture_output=True,
                           text=True, timeout=30)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertRegex(r.stdout, rf"0x{shared_key:08x} .* shared\n")
        self.assertRegex(r.stdout, rf"0x{copy_key:08x} .* copy\n")
        private.close()

    def test_dereg_drops_the_shared_mapping(self):
        m = self.shared()
        a = self.reg_shared(m)
        b = self.reg_shared(m, PAGE, PAGE)  # a second MR in the same memory: one mapping, two references
        self.assertEqual(self.ways(), ({a: "shared", b: "shared"}, 1))
        self.assertEqual(self.c.call(DEREG_MR, struct.pack("<II", a, 0))[0], 0)
        self.assertEqual(self.ways(), ({b: "shared"}, 1))
        self.assertEqual(self.c.call(DEREG_MR, struct.pack("<II", b, 0))[0], 0)
        self.assertEqual(self.ways(), ({}, 0))

    def test_rereg_to_new_memory_moves_the_reference(self):
        m1, m2 = self.shared(), self.shared()
        private, paddr = private_pages(1)
        key = self.reg_shared(m1)
        self.assertEqual(self.ways(), ({key: "shared"}, 1))
        self.rereg(key, paddr, PAGE)  # to memory that is not shared: copying, m1 unmapped
        self.assertEqual(self.ways(), ({key: "copy"}, 0))
        self.rereg(key, m2.addr, m2.length, shared=m2)
        self.assertEqual(self.ways(), ({key: "shared"}, 1))
        self.rereg(key, m2.addr, m2.length, shared=m2)  # the same memory again: still one mapping
        self.assertEqual(self.ways(), ({key: "shared"}, 1))
        self.rereg(key, m1.addr, m1.length, shared=m1)  # m2 released, m1 mapped
        self.assertEqual(self.ways(), ({key: "shared"}, 1))
        self.assertEqual(self.c.call(DEREG_MR, struct.pack("<II", key, 0))[0], 0)
        self.assertEqual(self.ways(), ({}, 0))
        private.close()

    def test_listing_pages_through_every_mr_in_key_order(self):
        private, paddr = private_pages(1)
        # Freed key indices are reused, so key order need not be registration order.
        keys = sorted((self.reg(paddr, PAGE) for _ in range(3 * LIST_MRS_PER_REPLY - 3)), key=lambda k: k >> 8)
        # One page by hand: full, and pointing at the ninth MR.
        status, body, _ = self.c.call(LIST_MRS, struct.pack("<II", 0, 0))
        self.assertEqual(status, 0)
        count, next_index = struct.unpack_from("<II", body)
        self.assertEqual(count, LIST_MRS_PER_REPLY)
        first = [MR_ENTRY.unpack_from(body, 8 + i * MR_ENTRY.size)[0] for i in range(count)]
        self.assertEqual(first, keys[:LIST_MRS_PER_REPLY])
        self.assertEqual(next_index, keys[LIST_MRS_PER_REPLY] >> 8)
        # The tool reads every page.
        listed = [e["lkey"] for e in self.stats()["mrs"]]
        self.assertEqual(listed, keys)
        self.assertEqual(self.stats()["mr_ways"]["copy"], len(keys))
        private.close()


    def reg_dmabuf(self, fd, offset, length, iova=0x40000000):
        """REG_MR of a dma-buf MR (UROCE_REG_DMABUF, addr = the offset), `fd` passed; (status, lkey)."""
        body = struct.pack("<IIQQQIIIIQQQ", self.pd, LOCAL_WRITE, offset, length, iova, REG_DMABUF | REG_HAS_IOVA,
                           0, 0, 0, 0, 0, 0)
        status, reply, _ = self.c.call(REG_MR, body, [fd])
        return status, struct.unpack_from("<I", reply)[0] if status == 0 else None

    def test_dmabuf_mr_is_mapped_and_served_the_shared_way(self):
        """The daemon maps the fd of a dma-buf MR (a sealed memfd stands in:
        this machine has no udmabuf) and lists the MR as shared; what it
        cannot map is refused with the kernel's errors. Data through such an
        MR: provider_dmabuf_mr_memfd (tests/integration/provider/dmabuf_mr.c)."""
        sealed = os.memfd_create("uroce-dmabuf", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
        unsealed = os.memfd_create("uroce-dmabuf-unsealed", os.MFD_CLOEXEC)
        r, w = os.pipe()
        try:
            os.ftruncate(sealed, 4 * PAGE)
            fcntl.fcntl(sealed, F_ADD_SEALS, F_SEAL_SHRINK)
            os.ftruncate(unsealed, 4 * PAGE)
            self.assertEqual(self.reg_dmabuf(unsealed, 0, PAGE)[0], EINVAL)  # no dma-buf: it could shrink
            self.assertEqual(self.reg_dmabuf(r, 0, PAGE)[0], EINVAL)  # not a file at all
            self.assertEqual(self.reg_dmabuf(sealed, 3 * PAGE, 2 * PAGE)[0], EINVAL)  # past the end
            self.assertEqual(self.reg_dmabuf(sealed, 0, 0)[0], EINVAL)
            self.assertEqual(self.ways(), ({}, 0))
            status, key = self.reg_dmabuf(sealed, PAGE + 100, 2 * PAGE)  # touches 3 pages
            self.assertEqual(status, 0)
            status, second = self.reg_dmabuf(sealed, 0, PAGE)
            self.assertEqual(status, 0)
            self.assertEqual(self.ways(), ({key: "shared", second: "shared"}, 2))  # a window each
            # A new translation is refused (as mlx5); the MR stays as it was.
            body = struct.pack("<IIQQQIIIIQQQ", self.pd, LOCAL_WRITE, 0, PAGE, 0, 0, REREG_CHANGE_TRANSLATION, key,
                               0, 0, 0, 0)
            self.assertEqual(self.c.call(REREG_MR, body)[0], EOPNOTSUPP)
            self.assertEqual(self.c.call(DEREG_MR, struct.pack("<II", key, 0))[0], 0)
            self.assertEqual(self.ways(), ({second: "shared"}, 1))
            self.assertEqual(self.c.call(DEREG_MR, struct.pack("<II", second, 0))[0], 0)
            self.assertEqual(self.ways(), ({}, 0))
        finally:
            for fd in (sealed, unsealed, r, w):
                os.close(fd)


class VerbsPart(unittest.TestCase):
    """ibv_rc_pingpong, its MR's way while it waits, the counters after."""

    @classmethod
    def setUpClass(cls):
        cls.d = harness.Daemon(UROCED, UROCE, name=DEVICE, ip="192.0.2.1")
        cls.gid = cls.d.gid_index()

    @classmethod
    def tearDownClass(cls):
        cls.d.close()

    def pingpong(self, env, expected_way):
        port = harness.free_tcp_port()
        common = ["ibv_rc_pingpong", "-d", DEVICE, "-g", str(self.gid), "-p", str(port), "-n", "200"]
        before = stats_json(self.d.state)
        server = subprocess.Popen(self.d.exec_argv(*common), env=env, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True)
        client = None
        try:
            self.assertTrue(harness.wait_listening(port, server), "the server exited before listening")
            # It registered its buffer before listening.
            waiting = stats_json(self.d.state)
            self.assertTrue(waiting["mrs"], "the waiting server has no MR")
            self.assertEqual({m["way"] for m in waiting["mrs"]}, {expected_way}, waiting["mrs"])
            client = subprocess.Popen(self.d.exec_argv(*common, "127.0.0.1"), env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True)
            client_out, _ = client.communicate(timeout=60)
            server_out, _ = server.communicate(timeout=60)
        finally:
            for p in (server, client):
                if p is not None and p.poll() is None:
                    p.kill()
                    p.wait()
        self.assertEqual((client.returncode, server.returncode), (0, 0),
                         f"client:\n{client_out}\nserver:\n{server_out}\n{harness.tail(self.d.log_text())}")
        after = stats_json(self.d.state)
        delta = lambda group, name: after[group][name] - before[group][name]
        self.assertGreater(delta("engine", "rx_packets"), 0)
        self.assertGreater(delta("engine", "tx_packets"), 0)
        self.assertGreater(delta("frames", "rx_roce"), 0)
        self.assertGreater(delta("port", "tx_frames"), 0)
        self.assertEqual(delta("dma", "faults"), 0)
        self.assertGreater(after["idle"]["sleeps"], 0)
        assert_reasons_add_up(self, after)
        return delta

    def test_shared_by_default(self):
        delta = self.pingpong(dict(os.environ), "shared")
        self.assertGreater(delta("dma", "shared_ops"), 0)
        self.assertGreater(delta("dma", "shared_bytes"), 0)
        self.assertEqual(delta("dma", "copy_ops"), 0)

    def test_copy_when_sharing_is_off(self):
        delta = self.pingpong(dict(os.environ, UROCE_SHARE_MEMORY="0"), "copy")
        self.assertGreater(delta("dma", "copy_ops"), 0)
        self.assertGreater(delta("dma", "copy_bytes"), 0)
        self.assertEqual(delta("dma", "shared_ops"), 0)


def main():
    global UROCED, UROCE
    ap = argparse.ArgumentParser()
    ap.add_argument("--part", choices=["control", "verbs"], required=True)
    ap.add_argument("uroced")
    ap.add_argument("uroce")
    args = ap.parse_args()
    UROCED, UROCE = os.path.abspath(args.uroced), os.path.abspath(args.uroce)
    if args.part == "verbs":
        reason = None
        if os.geteuid() != 0:
            reason = f"needs root to create /dev/infiniband/uverbs_{DEVICE} (see docs/daemon.md)"
        elif harness.missing_tools(["ibv_rc_pingpong", "stdbuf"]):
            reason = f"not installed: {', '.join(harness.missing_tools(['ibv_rc_pingpong', 'stdbuf']))}"
        if reason:
            print(f"SKIP: {reason}")
            return harness.SKIP
    suite = unittest.defaultTestLoader.loadTestsFromTestCase(ControlPart if args.part == "control" else VerbsPart)
    if args.part == "control":
        suite.addTests(unittest.defaultTestLoader.loadTestsFromTestCase(LoopStallsGroup))
    result = unittest.TextTestRunner(verbosity=2, stream=sys.stderr).run(suite)
    return 0 if result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main())
