#!/usr/bin/env python3
"""libfabric's verbs provider (Debian's libfabric-bin) over uroce between two
uroced in two network namespaces: `fi_info -p verbs` lists the device for
MSG (rdma_cm RC) and for RDM through ofi_rxm, and `fi_pingpong` moves data
with its own integrity check (-c) over FI_EP_MSG (verbs: connected through
the emulated rdma_cm device and the IB CM on the wire) and FI_EP_RDM
(verbs;ofi_rxm: rxm connects on demand, also through rdma_cm).

usage: test_libfabric.py UROCED UROCE
Exit 77 (skipped) when not root or libfabric-bin is missing.
"""

import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import uroce_harness as harness  # noqa: E402

# fi_pingpong's out-of-band TCP port (its -p is the provider, so the default).
OOB_PORT = 47592
# Message sizes: one below the MTU, one over several packets, one past rxm's
# eager limit (rendezvous: an RDMA READ by the receiver).
SIZES = (64, 4096, 65536)


class LibfabricVerbs(unittest.TestCase):
    topo = None

    def fi_info(self, provider):
        import subprocess
        r = subprocess.run(self.topo.server.daemon.exec_argv("fi_info", "-p", provider), capture_output=True,
                           text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        return r.stdout

    def test_fi_info_lists_the_device_for_msg_and_rdm(self):
        msg = self.fi_info("verbs")
        self.assertIn(f"domain: {self.topo.server.device}\n", msg)
        self.assertIn("type: FI_EP_MSG", msg)
        self.assertIn("FI_PROTO_RDMA_CM_IB_RC", msg)
        rdm = self.fi_info("verbs;ofi_rxm")
        self.assertIn("provider: verbs;ofi_rxm", rdm)
        self.assertIn("type: FI_EP_RDM", rdm)

    def pingpong(self, provider, endpoint):
        for size in SIZES:
            with self.subTest(size=size):
                args = ["fi_pingpong", "-p", provider, "-e", endpoint, "-S", str(size), "-I", "100", "-c"]
                r = harness.run_pair(self.topo, args, args + [self.topo.net.ip[0]], OOB_PORT, timeout=60)
                self.assertTrue(r.ok(), f"{r.summary()}\n{r.describe()}")
                # The result line: size, sent, =acked (every message came back checked).
                self.assertRegex(r.client.output, r"(?m)^\S+\s+100\s+=100\s", r.describe())

    def test_fi_pingpong_msg_over_verbs(self):
        self.pingpong("verbs", "msg")

    def test_fi_pingpong_rdm_over_verbs_rxm(self):
        self.pingpong("verbs;ofi_rxm", "rdm")


def main():
    harness.set_binaries(sys.argv[1], sys.argv[2])

    def suite(topo):
        LibfabricVerbs.topo = topo
        return unittest.defaultTestLoader.loadTestsFromTestCase(LibfabricVerbs)

    return harness.run_tests("veth", ["fi_info", "fi_pingpong"], suite)


if __name__ == "__main__":
    sys.exit(main())
