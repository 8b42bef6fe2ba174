"""The uroce control protocol (emulator/abi/control.h) from Python, for tests
that act as clients: well-behaved ones and hostile ones."""

import array
import os
import socket
import struct

MAGIC = 0x434F5255
VERSION = 8  # UROCE_CTRL_VERSION (emulator/abi/control.h)
HDR = struct.Struct("<IHHIIiI")  # magic, version, op, length, seq, status, reserved

HELLO, QUERY_DEVICE, QUERY_PORT, ALLOC_PD, DEALLOC_PD, REG_MR, REREG_MR, DEREG_MR = range(1, 9)
ALLOC_MW, DEALLOC_MW, BIND_MW, CREATE_RELAXED_POOL, FLUSH_RELAXED, STATUS = range(9, 15)
CREATE_CQ, DESTROY_CQ, CREATE_QP, MODIFY_QP, QUERY_QP, DESTROY_QP = range(15, 21)
CREATE_SRQ, MODIFY_SRQ, QUERY_SRQ, DESTROY_SRQ, CREATE_AH, DESTROY_AH, DOORBELL = range(21, 28)

REG_HAS_IOVA = 1

STATUS_REPLY = struct.Struct("<6I3Q")


class Client:
    def __init__(self, path):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.sock.connect(path)
        self.seq = 0

    def close(self):
        self.sock.close()

    def call(self, op, body=b"", fds=None):
        self.seq += 1
        msg = HDR.pack(MAGIC, VERSION, op, HDR.size + len(body), self.seq, 0, 0) + body
        if fds:
            self.sock.sendmsg([msg], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))])
        else:
            self.sock.send(msg)
        data, ancdata, _flags, _addr = self.sock.recvmsg(1024, socket.CMSG_SPACE(4))
        got = []
        for level, typ, payload in ancdata:
            if level == socket.SOL_SOCKET and typ == socket.SCM_RIGHTS:
                got.extend(array.array("i", payload[: len(payload) - len(payload) % 4]))
        if not data:
            raise ConnectionError("daemon closed the connection")
        magic, _v, rop, length, seq, status, _r = HDR.unpack_from(data)
        assert magic == MAGIC and rop == op and seq == self.seq and length == len(data), (magic, rop, seq, length)
        return status, data[HDR.size:], got

    def hello(self, process_files=None):
        """HELLO with this process's /proc/self/mem and /proc/self/maps (how
        the daemon reaches a client's memory), or with `process_files`, a
        list of fds to send instead (hostile clients)."""
        opened = []
        if process_files is None:
            opened = [os.open("/proc/self/mem", os.O_RDWR | os.O_CLOEXEC),
                      os.open("/proc/self/maps", os.O_RDONLY | os.O_CLOEXEC)]
            process_files = opened
        try:
            status, body, fds = self.call(HELLO, struct.pack("<II", VERSION, 0), process_files)
        finally:
            for fd in opened:
                os.close(fd)
        return status, struct.unpack_from("<I", body)[0] if status == 0 else None, fds

    def alloc_pd(self):
        status, body, _ = self.call(ALLOC_PD)
        return status, struct.unpack_from("<I", body)[0] if status == 0 else None

    def dealloc_pd(self, pd):
        return self.call(DEALLOC_PD, struct.pack("<II", pd, 0))[0]

    def reg_mr(self, pd, addr, length, access, iova=None):
        flags = REG_HAS_IOVA if iova is not None else 0
        # ..., flags, rereg_flags, lkey, reserved, shared_addr, shared_length, shared_offset
        body = struct.pack("<IIQQQIIIIQQQ", pd, access, addr, length, iova or 0, flags, 0, 0, 0, 0, 0, 0)
        status, reply, _ = self.call(REG_MR, body)
        return status, struct.unpack_from("<II", reply) if status == 0 else None

    def dereg_mr(self, lkey):
        return self.call(DEREG_MR, struct.pack("<II", lkey, 0))[0]

    def create_cq(self, cqe, cookie=0, channel_fd=None, has_channel=None):
        """CREATE_CQ; returns (status, handle, granted cqe, ring_bytes, fds)."""
        if has_channel is None:
            has_channel = 1 if channel_fd is not None else 0
        body = struct.pack("<IIQII", cqe, 0, cookie, has_channel, 0)
        status, reply, fds = self.call(CREATE_CQ, body, [channel_fd] if channel_fd is not None else None)
        handle, granted, ring_bytes = struct.unpack_from("<IIQ", reply) if status == 0 else (None, None, None)
        return status, handle, granted, ring_bytes, fds

    def create_qp(self, pd, send_cq, recv_cq, srq=0, qp_type=2, cap=(4, 4, 1, 1, 0), cookie=0):
        """CREATE_QP (RC by default); returns (status, reply fields, fds) with
        the reply as a dict: qpn, cap (5 values), ring_bytes, sq_offset,
        rq_offset."""
        body = struct.pack("<IIII BB6x 6I Q", pd, send_cq, recv_cq, srq, qp_type, 0, *cap, 0, cookie)
        status, reply, fds = self.call(CREATE_QP, body)
        if status != 0:
            return status, None, fds
        qpn, _r, *rest = struct.unpack_from("<II 6I QII", reply)
        fields = {"qpn": qpn, "cap": tuple(rest[:5]), "ring_bytes": rest[6], "sq_offset": rest[7],
                  "rq_offset": rest[8]}
        return status, fields, fds

    def create_srq(self, pd, max_wr, max_sge, cookie=0):
        """CREATE_SRQ; returns (status, handle, max_wr, max_sge, ring_bytes, fds)."""
        body = struct.pack("<6IQQ", pd, 0, max_wr, max_sge, 0, 0, cookie, 0)
        status, reply, fds = self.call(CREATE_SRQ, body)
        if status != 0:
            return status, None, None, None, None, fds
        _pd, handle, granted_wr, granted_sge, _limit, _mask, _cookie, ring_bytes = struct.unpack_from("<6IQQ", reply)
        return status, handle, granted_wr, granted_sge, ring_bytes, fds

    def doorbell(self):
        """DOORBELL; returns (status, fds)."""
        status, _reply, fds = self.call(DOORBELL)
        return status, fds

    def status(self):
        status, body, _ = self.call(STATUS)
        assert status == 0
        names = ["clients", "pds", "mrs", "mws", "relaxed_pools", "reserved", "clients_closed",
                 "objects_reclaimed", "bad_messages"]
        return dict(zip(names, STATUS_REPLY.unpack_from(body)))
