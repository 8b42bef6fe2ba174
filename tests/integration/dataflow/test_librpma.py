#!/usr/bin/env python3
"""librpma 1.2 (Debian's librpma-dev) over uroce between two uroced in two
network namespaces, through the emulated rdma_cm device: `rpma_check`
(rpma_check.c) connects with rpma_ep_listen / rpma_conn_req_new, sends the
server's MR descriptor in private data (rpma_mr_get_descriptor,
rpma_mr_remote_from_descriptor), and the client's rpma_write, rpma_flush and
rpma_read are checked byte for byte on both sides. A descriptor the client
moves past the region (the SECURITY WARNING of
rpma_mr_remote_from_descriptor(3)) makes the write fail with a remote access
error, and the server finds its region and the guard pages around it
unchanged.

usage: test_librpma.py UROCED UROCE RPMA_CHECK
Exit 77 (skipped) when not root.
"""

import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import uroce_harness as harness  # noqa: E402

PORT = "7204"


class Librpma(unittest.TestCase):
    topo = None
    rpma_check = None

    def pair(self, server_mode, client_mode):
        """rpma_check's server, then its client once the server listens (it
        prints so; rdma_cm listeners have no TCP port to watch)."""
        server = harness.start_program("server", self.topo.server.daemon.exec_argv(
            self.rpma_check, server_mode, self.topo.net.ip[0], PORT))
        try:
            import time
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline and server.proc.poll() is None:
                server.out.seek(0)
                if "server: listening" in server.out.read():
                    break
                time.sleep(0.01)
            client = harness.start_program("client", self.topo.client.daemon.exec_argv(
                self.rpma_check, client_mode, self.topo.net.ip[0], PORT))
            for p in (client, server):
                try:
                    p.proc.wait(timeout=60)
                except Exception:
                    pass
            c = client.finish("still running after 60 s")
        finally:
            s = server.finish("still running after 60 s")
        why = f"{c.describe()}\n{s.describe()}\n{self.topo.daemon_logs()}"
        self.assertEqual(c.returncode, 0, why)
        self.assertEqual(s.returncode, 0, why)
        return c.output, s.output

    def test_write_flush_read_checked_byte_for_byte(self):
        cout, sout = self.pair("server", "client")
        self.assertIn("client: wrote 4096, flushed, read 4096 bytes back, all checked", cout)
        self.assertIn("server: 8192 bytes checked, guards untouched", sout)

    def test_tampered_descriptor_is_a_remote_access_error_and_writes_nothing(self):
        cout, sout = self.pair("server-untouched", "client-tampered")
        self.assertIn("client: tampered write refused: remote access error", cout)
        self.assertIn("server: 8192 bytes checked, guards untouched", sout)


def main():
    harness.set_binaries(sys.argv[1], sys.argv[2])
    Librpma.rpma_check = os.path.abspath(sys.argv[3])

    def suite(topo):
        Librpma.topo = topo
        return unittest.defaultTestLoader.loadTestsFromTestCase(Librpma)

    return harness.run_tests("veth", [], suite)


if __name__ == "__main__":
    sys.exit(main())
