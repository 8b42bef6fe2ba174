#!/usr/bin/env python3
"""fio's rdma ioengine (Debian's fio 3.33) between two uroced in two network
namespaces, connected through the emulated rdma_cm and the IB CM on the wire,
in its three modes:

- write: the client RDMA WRITEs into the buffers the server advertised;
- read: the client RDMA READs them;
- send: the client SENDs into the server's posted receives, and the server
  checks every block with fio's own verification (`--verify=crc32c`: the
  client fills each block with a verify header and checksum, the server
  verifies each block it receives; a block sent without them fails).

fio picks the role from the direction: `--rw=read` listens (the server),
`--rw=write` connects (the client); `--verb` on the client picks the mode.
The server learns it from the client's first message. In the memory modes
the client ends by a SEND the server waits for, so the server's clean exit
proves it got that last message after all the client's I/O.

What the engine needs from the peer, and where a pair fails on any RC device
(the kernel's rdma_cm included): rdma_connect and rdma_accept leave
rnr_retry_count 0, so in send mode the server must keep more receives
posted than the client has SENDs in flight (fio's own advice in
engines/rdma.c); a SEND that meets no receive completes RNR_RETRY_EXC_ERR
and the client then waits forever. The client's iodepth must not exceed the
server's (the number of buffers it advertises) in the memory modes. And fio
forks a process per job: `--thread` keeps each side one process, so a
stopped pair leaves nothing behind.

The data direction is checked against each daemon's port counters: the
client's daemon sends the blocks in write and send mode, the server's in
read mode.

usage: test_fio.py UROCED UROCE
Exit 77 (skipped) when not root or fio is missing.
"""

import json
import os
import re
import sys
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import uroce_harness as harness  # noqa: E402

PORT = 19870
BLOCK = 4096
BLOCKS = 128
# Buffers the server advertises (memory modes) or receives it posts (send
# mode): one per block, so no SEND can find the receive queue empty however
# long the server program is kept off the CPU (rnr_retry is 0, see above).
SERVER_IODEPTH = BLOCKS
CLIENT_IODEPTH = 4
LISTEN_SECONDS = 15
RUN_SECONDS = 30
# The server prints this once rdma_listen has returned (engines/rdma.c).
LISTENING = "fio: waiting for connection"


def fio_argv(name, *args):
    return ["fio", f"--name={name}", "--ioengine=rdma", f"--port={PORT}", f"--bs={BLOCK}",
            f"--size={BLOCK * BLOCKS}", "--thread", "--output-format=json", *args]


def fio_job(output):
    """The job of fio's JSON report, which follows its log lines."""
    start = re.search(r"(?m)^\{", output)
    if start is None:
        raise AssertionError(f"no JSON report in fio's output:\n{output}")
    return json.loads(output[start.start():])["jobs"][0]


class FioRdma(unittest.TestCase):
    topo = None

    def tx_bytes(self):
        return [d.stats()["port"]["tx_bytes"] for d in self.topo.daemons]

    def run_pair(self, verb, server_args=(), client_args=()):
        """Runs one fio server and client; returns (server job, client job,
        the bytes each daemon sent meanwhile)."""
        server_argv = fio_argv("server", "--rw=read", f"--iodepth={SERVER_IODEPTH}", *server_args)
        client_argv = fio_argv("client", f"--hostname={self.topo.net.ip[0]}", f"--verb={verb}",
                               "--rw=write", f"--iodepth={CLIENT_IODEPTH}", *client_args)
        before = self.tx_bytes()
        server = harness.start_program("server", self.topo.server.daemon.exec_argv(*server_argv))
        client = None
        try:
            self.wait_for_listener(server)
            client = harness.start_program("client", self.topo.client.daemon.exec_argv(*client_argv))
            deadline = time.monotonic() + RUN_SECONDS
            while time.monotonic() < deadline and any(p.proc.poll() is None for p in (server, client)):
                time.sleep(0.05)
        finally:
            sides = [p.finish(f"still running after {RUN_SECONDS} s") for p in (server, client) if p is not None]
        sent = [after - b for after, b in zip(self.tx_bytes(), before)]
        report = "\n".join(s.describe() for s in sides) + "\n" + self.topo.daemon_logs()
        for side in sides:
            self.assertEqual(side.returncode, 0, report)
        jobs = [fio_job(side.output) for side in sides]
        for job in jobs:
            self.assertEqual(job["error"], 0, report)
        return jobs[0], jobs[1], sent

    def wait_for_listener(self, server):
        deadline = time.monotonic() + LISTEN_SECONDS
        while time.monotonic() < deadline:
            self.assertIsNone(server.proc.poll(), "the fio server exited before listening")
            if LISTENING in os.pread(server.out.fileno(), 1 << 16, 0).decode(errors="replace"):
                return
            time.sleep(0.02)
        self.fail(f"the fio server did not listen within {LISTEN_SECONDS} s")

    def assert_client_moved_every_block(self, client):
        self.assertEqual(client["write"]["total_ios"], BLOCKS)
        self.assertEqual(client["write"]["io_bytes"], BLOCK * BLOCKS)

    def test_rdma_write(self):
        _, client, (server_sent, client_sent) = self.run_pair("write")
        self.assert_client_moved_every_block(client)
        self.assertGreaterEqual(client_sent, BLOCK * BLOCKS)
        self.assertLess(server_sent, BLOCK * BLOCKS // 4)  # ACKs and the control messages

    def test_rdma_read(self):
        _, client, (server_sent, client_sent) = self.run_pair("read")
        self.assert_client_moved_every_block(client)
        self.assertGreaterEqual(server_sent, BLOCK * BLOCKS)  # the READ responses
        self.assertLess(client_sent, BLOCK * BLOCKS // 4)

    def test_send_verified_by_the_server(self):
        server, client, (server_sent, client_sent) = self.run_pair(
            "send", server_args=["--verify=crc32c"],
            client_args=["--verify=crc32c", "--do_verify=0", "--verify_state_save=0"])
        self.assert_client_moved_every_block(client)
        self.assertEqual(server["read"]["total_ios"], BLOCKS)  # each received and verified
        self.assertEqual(server["read"]["io_bytes"], BLOCK * BLOCKS)
        self.assertGreaterEqual(client_sent, BLOCK * BLOCKS)
        self.assertLess(server_sent, BLOCK * BLOCKS // 4)


def main():
    harness.set_binaries(sys.argv[1], sys.argv[2])

    def suite(topo):
        FioRdma.topo = topo
        return unittest.defaultTestLoader.loadTestsFromTestCase(FioRdma)

    return harness.run_tests("veth", ["fio"], suite)


if __name__ == "__main__":
    sys.exit(main())
