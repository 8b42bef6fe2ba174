#!/usr/bin/env python3
"""Writes the seed inputs of fuzz_engine into tests/fuzz/corpus_engine/.

The input format is fuzz_engine.cc's (a flags byte, then operations); the
helpers below mirror its readers and choosers one for one, so when the
format changes, change both and run this again:

    tests/fuzz/make_engine_seeds.py

Each seed is a short scenario that gets past the early drops into one part
of the engine: the responder (SEND, WRITE, READ, atomics, UD, UC), the
victim talking to itself through echoed frames (requester and completer
with real PSNs), timers, RNR, bad WQEs, memory windows, QPs in error.
"""
import os
import struct
import sys

# Operations (Victim::Op) and flags (Victim::Flags).
RAW, REQUEST, RESPONSE, POST_SEND, GARBAGE, POST_RECV, CLOCK, MODIFY, ECHO = range(9)
XRC_POST_SEND, XRC_REQUEST, XRC_OBJECTS = range(9, 12)
NO_DRAIN, NO_RECOVER, FOREVER, NO_TIMEOUT, SRQ_LIMIT, XRC_ONE_DOMAIN = (1 << b for b in range(6))

# XRC SRQ selectors (choose_xrc_srqn): SRQs 2 and 3 (domain 1, the target's),
# SRQ 4 (domain 2), the ordinary SRQ 1, the absent number 5.
XSRQ_2, XSRQ_3, XSRQ_4, XSRQ_ORDINARY, XSRQ_ABSENT = range(5)
# XRC objects selectors (op_xrc_objects): bits 0-2 the action, bits 3-4 the SRQ, bit 7 domain 2 / SQD.
XOBJ_NEW_SRQ, XOBJ_DEL_SRQ, XOBJ_NEW_TGT, XOBJ_DEL_TGT, XOBJ_RECV, XOBJ_ERR, XOBJ_GARBAGE_WQE, XOBJ_SQ_PRODUCER = range(8)

# Victim QP indexes: RC, UC, UD, RC on the SRQ.
RC, UC, UD, RC_SRQ = range(4)

# Regions: 0 every right, 1 every right (shared memfd), 2 remote read only,
# 3 local write only, 4 every right behind an iova, 5 every right in another
# PD, 6 every right with its second page inaccessible.
MR_LEN = [2 * 4096 - 40, 2 * 4096, 4096, 4096 + 100, 4096, 4096, 2 * 4096]
REGIONS = len(MR_LEN)

# Work-request opcodes (enum ibv_wr_opcode).
WR_WRITE, WR_WRITE_IMM, WR_SEND, WR_SEND_IMM, WR_READ, WR_CAS, WR_FAA, WR_LOCAL_INV, WR_BIND_MW, WR_SEND_INV = range(10)
SIGNALED = 1 << 1
INLINE = 1 << 3

# Index into fuzz_engine.cc's kRcCodes for an opcode's low five bits.
RC_CODES = [0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0A, 0x0B, 0x0C, 0x13, 0x14, 0x16, 0x17,
            0x11, 0x10, 0x81]


def u8(v):
    return struct.pack("<B", v & 0xFF)


def u16(v):
    return struct.pack("<H", v & 0xFFFF)


def u32(v):
    return struct.pack("<I", v & 0xFFFFFFFF)


def u64(v):
    return struct.pack("<Q", v & 0xFFFFFFFFFFFFFFFF)


def key(region=0, mw_byte=None):
    """choose_key: a region's key, or the memory window with a key byte."""
    if mw_byte is not None:
        return u8(REGIONS) + u8(mw_byte)
    return u8(region)


def address(region=0, offset=0):
    """choose_address, mode 0: region's iova + offset."""
    return u8(region) + u16(offset)


def length(n):
    """choose_length: up to 4095 as a u16."""
    assert n < 4096
    return u8(1) + u16(n)


def psn(offset=0):
    """choose_psn: the base (expected or oldest unacked PSN) + offset."""
    return u8(0) + u8(offset)


def request(qp, code, payload=0, bits=0x02, va=(0, 0), rkey=0, dma_len=None, atomic_va=(0, 0), swap=0,
            compare=0, imm=0, inv_key=None, psn_offset=0, v6=False, fill=0x11):
    target = qp | (0x04 if v6 else 0)
    out = u8(REQUEST) + u8(target) + u8(RC_CODES.index(code)) + u8(bits)
    out += psn(psn_offset)
    rkey = rkey if isinstance(rkey, bytes) else key(rkey)
    out += address(*va) + rkey + length(payload if dma_len is None else dma_len)
    out += address(*atomic_va) + rkey + u64(swap) + u64(compare)
    out += u32(imm) + (inv_key if inv_key is not None else key(0))
    out += u32(0x99)  # DETH source QP (Q_Key: the QP's own)
    out += u8(0) + u32(0)  # AETH, unused by requests
    out += u16(payload) + u8(fill)
    return out


def ud_send(payload, imm=False, v6=False):
    # For UD the opcode is SEND_ONLY, or SEND_ONLY_WITH_IMMEDIATE for odd selectors.
    out = u8(REQUEST) + u8(UD | (0x04 if v6 else 0)) + u8(1 if imm else 0) + u8(0)
    out += psn(0) + address() + key() + length(0) + address() + key() + u64(0) + u64(0) + u32(7) + key()
    out += u32(0x55) + u8(0) + u32(0) + u16(payload) + u8(0x42)
    return out


def response(code_index, syndrome_sel=0, value=0, payload=0, psn_offset=0, qp_srq=False, from_last=False,
             original=0):
    target = (1 if qp_srq else 0) | (0x04 if from_last else 0)
    out = u8(RESPONSE) + u8(target) + u8(code_index) + psn(psn_offset)
    out += u8(syndrome_sel) + u8(value) + u32(0) + u64(original) + u16(payload) + u8(0x33)
    return out


def post_send(qp, opcode, sges=(), flags=SIGNALED, remote=(0, 0), rkey=0, imm=0, inline_len=0, ud=None,
              atomic=(0, 0), bind=None, inv_key=None):
    out = u8(POST_SEND) + u8(qp) + u8(0x01) + u8(opcode) + u8(flags) + u8(len(sges)) + u32(imm) + u8(inline_len)
    if opcode in (WR_CAS, WR_FAA):
        out += address(*remote) + key(rkey) + u64(atomic[0]) + u64(atomic[1])
    elif opcode == WR_BIND_MW:
        addr, size, key_byte, access = bind
        out += address(0, addr) + length(size) + u8(key_byte) + key(0) + u8(access)
    elif opcode in (WR_LOCAL_INV, WR_SEND_INV):
        out += inv_key
    elif qp == UD:
        ah, self_qpn = ud
        out += u8(ah) + u8(0 if self_qpn else 1) + (b"" if self_qpn else u32(0x777)) + u8(0)
    else:
        out += address(*remote) + key(rkey)
    for region, offset, size in sges:
        out += address(region, offset) + length(size) + key(region)
    return out


def post_recv(qp, sges_per_wqe):
    out = u8(POST_RECV) + u8(qp) + u8(len(sges_per_wqe))
    for sges in sges_per_wqe:
        out += u8(len(sges))
        for region, offset, size in sges:
            out += address(region, offset) + length(size) + key(region)
    return out


def echo_all():
    return u8(ECHO) + u8(0)


def echo_one(index, at, xor, keep_icrc=False):
    return u8(ECHO) + u8(0x80 | (0x40 if keep_icrc else 0)) + u8(index) + u16(at) + u8(xor)


def clock(ticks):
    """ticks of 50 us; 0: to the engine's next timer."""
    return u8(CLOCK) + u16(ticks)


def modify(qp, how, access=0x0E):
    """how: 0 back to RTS through RESET, 1 ERR, 2 SQD, 3 RTS with these
    remote rights (IBV_ACCESS_* bits)."""
    return u8(MODIFY) + u8(qp << 2 | how) + (u8(access) if how == 3 else b"")


SQ_STRIDE = 64 + 4 * 16 + 64  # TestQp's strides
RQ_STRIDE = 16 + 4 * 16


def garbage(what, qp, data=b""):
    """what: 0 SQ slot, 1 RQ (or SRQ) slot, 2 SQ producer, 3 RQ producer,
    4 CQ consumer, 5 CQ notify_request, 6 SQ consumer, 7 RQ consumer."""
    if what in (0, 1):
        data = data.ljust(SQ_STRIDE if what == 0 else RQ_STRIDE, b"\0")
    return u8(GARBAGE) + u8(qp << 3 | what) + data


def raw(frame, aim_qp=None):
    how = 0 if aim_qp is None else (0x02 | aim_qp << 2)
    return u8(RAW) + u8(how) + u16(len(frame)) + frame


def loops(n):
    return echo_all() * n


def xrc_post_send(srq, opcode, **kw):
    # As post_send on a non-UD QP, after the XRC SRQ selector.
    return u8(XRC_POST_SEND) + u8(srq) + post_send(RC, opcode, **kw)[2:]


def xrc_request(code, srq, **kw):
    # As request to the XRC target (selector 0), XRCETH selector last.
    return u8(XRC_REQUEST) + request(0, code, **kw)[1:] + u8(srq)


def xrc_objects(action, srq=0, domain2=False, extra=b""):
    return u8(XRC_OBJECTS) + u8(action | srq << 3 | (0x80 if domain2 else 0)) + extra


SEEDS = {
    "rc_send_only": bytes([0]) + request(RC, 0x04, payload=100),
    "rc_send_first_middle_last": bytes([0]) + request(RC, 0x00, payload=256) + request(RC, 0x01, payload=256)
    + request(RC, 0x02, payload=50),
    "rc_send_imm_solicited": bytes([0]) + request(RC, 0x05, payload=8, bits=0x03, imm=0x12345678),
    "rc_write_only": bytes([0]) + request(RC, 0x0A, payload=64, va=(0, 128)),
    "rc_write_shared_iova": bytes([0]) + request(RC, 0x0A, payload=200, va=(1, 4000), rkey=1)
    + request(RC, 0x0A, payload=32, va=(4, 16), rkey=4),
    "rc_write_first_last_imm": bytes([0]) + request(RC, 0x06, payload=256, dma_len=300, va=(0, 0))
    + request(RC, 0x09, payload=44, imm=5),
    "rc_write_out_of_range": bytes([0]) + request(RC, 0x0A, payload=64, va=(0, MR_LEN[0] - 10)),
    "rc_write_read_only_mr": bytes([0]) + request(RC, 0x0A, payload=16, va=(2, 0), rkey=2),
    "rc_read_request": bytes([0]) + request(RC, 0x0C, dma_len=600, va=(2, 8), rkey=2) + echo_all(),
    "rc_fetch_add_cmp_swap": bytes([0]) + request(RC, 0x14, atomic_va=(1, 64), rkey=1, swap=3)
    + request(RC, 0x13, atomic_va=(1, 64), rkey=1, swap=9, compare=3) + request(RC, 0x13, psn_offset=0xFF,
                                                                               atomic_va=(1, 64), rkey=1),
    "rc_psn_gap_then_dup": bytes([0]) + request(RC, 0x04, payload=4, psn_offset=3)
    + request(RC, 0x04, payload=4) + request(RC, 0x04, payload=4, psn_offset=0xFF),
    "rc_srq_send": bytes([SRQ_LIMIT]) + request(RC_SRQ, 0x04, payload=20) * 4,
    "uc_send_write": bytes([0]) + request(UC, 0x04, payload=30) + request(UC, 0x0A, payload=12, va=(0, 40))
    + request(UC, 0x00, payload=256, psn_offset=2) + request(UC, 0x02, payload=10),
    "ud_send_v4_v6": bytes([0]) + ud_send(100) + ud_send(12, imm=True, v6=True),
    "loop_rc_write": bytes([0]) + post_send(RC, WR_WRITE, sges=[(1, 0, 600), (0, 16, 100)], remote=(0, 1000))
    + loops(6),
    "loop_rc_read": bytes([0]) + post_send(RC, WR_READ, sges=[(0, 2000, 700)], remote=(2, 0), rkey=2) + loops(6),
    "loop_rc_atomics": bytes([0]) + post_send(RC, WR_FAA, sges=[(0, 8, 8)], remote=(1, 16), rkey=1, atomic=(1, 0))
    + post_send(RC, WR_CAS, sges=[(0, 16, 8)], remote=(1, 16), rkey=1, atomic=(1, 5)) + loops(6),
    "loop_rc_send_inline": bytes([0]) + post_send(RC, WR_SEND_IMM, flags=SIGNALED | INLINE, inline_len=60, imm=1)
    + loops(4),
    "loop_srq_send": bytes([0]) + post_send(RC_SRQ, WR_SEND, sges=[(1, 0, 300)]) + loops(4),
    "loop_uc_write_imm": bytes([0]) + post_send(UC, WR_WRITE_IMM, sges=[(0, 0, 520)], remote=(4, 0), rkey=4)
    + loops(2),
    "loop_ud_self": bytes([0]) + post_send(UD, WR_SEND, sges=[(1, 0, 200)], ud=(1, True))
    + post_send(UD, WR_SEND, sges=[(1, 0, 20)], ud=(2, True)) + loops(2),
    "loop_bind_then_invalidate": bytes([0]) + post_send(RC, WR_BIND_MW, bind=(64, 256, 0x77, 0x06))
    + request(RC, 0x0A, payload=16, va=(0, 70), rkey=key(mw_byte=0x77))
    + request(RC, 0x17, payload=4, inv_key=key(mw_byte=0x77))
    + request(RC, 0x0A, payload=16, va=(0, 70), rkey=key(mw_byte=0x77))
    + loops(2),
    "rc_timeout_retry_exceeded": bytes([0]) + post_send(RC, WR_SEND, sges=[(0, 0, 40)]) + clock(200) + clock(200)
    + clock(200) + clock(200),
    "rc_rnr_nak": bytes([0]) + post_send(RC, WR_SEND, sges=[(0, 0, 40)]) + response(0, syndrome_sel=1, value=2)
    + clock(10) + response(0, syndrome_sel=1, value=2) + clock(10) + loops(2),
    "rc_nak_codes": bytes([FOREVER]) + post_send(RC, WR_WRITE, sges=[(0, 0, 600)], remote=(0, 0))
    + response(0, syndrome_sel=2, value=0, psn_offset=1) + loops(1) + response(0, syndrome_sel=2, value=2),
    "rc_read_response_by_hand": bytes([0]) + post_send(RC, WR_READ, sges=[(0, 0, 300)], remote=(0, 0))
    + response(2, payload=0x8000) + response(4, payload=44),
    "rc_atomic_ack_by_hand": bytes([0]) + post_send(RC, WR_FAA, sges=[(0, 8, 8)], remote=(0, 8), atomic=(1, 0))
    + response(1, original=0x1234),
    "bad_wqes": bytes([NO_RECOVER]) + garbage(0, RC, bytes([0xFF] * 16)) + garbage(2, UC, u32(0x1000))
    + garbage(3, RC_SRQ, u32(0x10000)) + post_send(RC, WR_SEND, sges=[(2, 0, 8)]) + clock(1),
    "err_then_posts": bytes([NO_RECOVER]) + modify(RC, 1) + post_send(RC, WR_SEND, sges=[(0, 0, 8)])
    + post_recv(RC, [[(3, 0, 64)]]) + modify(RC, 0) + request(RC, 0x04, payload=8),
    "sqd_and_back": bytes([0]) + modify(RC, 2) + post_send(RC, WR_WRITE, sges=[(0, 0, 8)]) + modify(RC, 3)
    + loops(2),
    "cq_overrun": bytes([NO_DRAIN]) + (post_send(RC, WR_WRITE, sges=[(0, 0, 8)]) + loops(2)) * 20,
    # A client that takes a post back: the SQ producer moves behind what the
    # engine fetched (this hung the engine for 2^32 WQE copies).
    "regress_sq_producer_backwards": bytes([0]) + garbage(2, RC, u32(5)) + garbage(2, RC, u32(2)),
    "dma_faults": bytes([0]) + request(RC, 0x0A, payload=64, va=(6, 4096 - 32), rkey=6) + modify(RC, 0)
    + request(RC, 0x0C, dma_len=600, va=(6, 3800), rkey=6) + request(RC, 0x14, atomic_va=(6, 4096), rkey=6)
    + post_send(RC, WR_SEND, sges=[(6, 4000, 200)]) + post_recv(UC, [[(6, 4000, 400)]] * 4)
    + request(UC, 0x04, payload=200),
    "other_pd_and_rights": bytes([0]) + request(RC, 0x0A, payload=8, va=(5, 0), rkey=5) + modify(RC, 0)
    + modify(RC, 3, access=0x02) + request(RC, 0x0C, dma_len=8, va=(0, 0), rkey=0)
    + post_send(RC, WR_WRITE, sges=[(5, 0, 8)]),
    "next_deadline": bytes([0]) + post_send(RC, WR_SEND, sges=[(0, 0, 40)]) + clock(0) * 4 + loops(1),
    "echo_mutated": bytes([0]) + post_send(RC, WR_WRITE, sges=[(0, 0, 700)]) + echo_one(0, 60, 0x40)
    + echo_one(1, 45, 0x01, keep_icrc=True) + loops(3),    "xrc_loop_send": bytes([0]) + xrc_post_send(XSRQ_2, WR_SEND, sges=[(1, 0, 300)]) + loops(4),
    "xrc_loop_write_read_atomics": bytes([0])
    + xrc_post_send(XSRQ_3, WR_WRITE_IMM, sges=[(0, 0, 520)], remote=(4, 0), rkey=4, imm=9)
    + xrc_post_send(XSRQ_2, WR_READ, sges=[(0, 2000, 300)], remote=(2, 0), rkey=2)
    + xrc_post_send(XSRQ_2, WR_FAA, sges=[(0, 8, 8)], remote=(1, 16), rkey=1, atomic=(1, 0)) + loops(6),
    "xrc_loop_inline_inv_bind": bytes([0])
    + xrc_post_send(XSRQ_2, WR_SEND_IMM, flags=SIGNALED | INLINE, inline_len=60, imm=1)
    + xrc_post_send(XSRQ_3, WR_SEND_INV, sges=[(0, 0, 40)], inv_key=key(0, mw_byte=0x77))
    + xrc_post_send(XSRQ_2, WR_BIND_MW, bind=(64, 256, 0x77, 0x06))
    + xrc_post_send(XSRQ_2, WR_LOCAL_INV, inv_key=key(0, mw_byte=0x77)) + loops(4),
    "xrc_loop_foreign_ordinary_absent": bytes([0]) + xrc_post_send(XSRQ_4, WR_SEND, sges=[(0, 0, 40)])
    + loops(2) + xrc_post_send(XSRQ_ORDINARY, WR_SEND, sges=[(0, 0, 40)]) + loops(2)
    + xrc_post_send(XSRQ_ABSENT, WR_WRITE, sges=[(0, 0, 40)], remote=(0, 0)) + loops(2),
    "xrc_one_domain": bytes([XRC_ONE_DOMAIN]) + xrc_post_send(XSRQ_4, WR_SEND, sges=[(1, 0, 600)]) + loops(4),
    "xrc_requests": bytes([0]) + xrc_request(0x04, XSRQ_2, payload=100) + xrc_request(0x0A, XSRQ_3, payload=64,
                                                                                      va=(0, 128))
    + xrc_request(0x04, XSRQ_4, payload=8) + xrc_request(0x0C, XSRQ_ABSENT, dma_len=300, va=(2, 8), rkey=2)
    + xrc_request(0x14, XSRQ_2, atomic_va=(1, 64), rkey=1, swap=3),
    "xrc_objects_churn": bytes([0]) + xrc_request(0x00, XSRQ_2, payload=256) + xrc_objects(XOBJ_DEL_SRQ, 0)
    + xrc_request(0x02, XSRQ_2, payload=20) + xrc_objects(XOBJ_NEW_TGT, domain2=True)
    + xrc_request(0x04, XSRQ_4, payload=8) + xrc_objects(XOBJ_DEL_TGT) + xrc_request(0x04, XSRQ_2, payload=8)
    + xrc_objects(XOBJ_NEW_SRQ, 1, domain2=True) + xrc_objects(XOBJ_RECV, 1, extra=post_recv(RC, [[(0, 0, 100)]])[2:])
    + xrc_objects(XOBJ_ERR) + xrc_post_send(XSRQ_2, WR_SEND, sges=[(0, 0, 40)]) + loops(2)
    + xrc_objects(XOBJ_GARBAGE_WQE, extra=bytes(range(0xF0, 0xFF)) * 8) + xrc_objects(XOBJ_SQ_PRODUCER, extra=u32(40))
    + loops(1),
}


def raw_seeds(corpus):
    """A few captured frames, aimed at the victim's QPs."""
    picks = {
        "rxe_write_bw_1_rc_write_first.bin": RC,
        "rxe_atomic_cs_1_rc_compare_swap.bin": RC,
        "rxe_ud_pingpong_1_ud_send_only.bin": UD,
        "rxe_rc_pingpong_5_rc_ack.bin": RC,
    }
    out = {}
    for name, qp in picks.items():
        path = os.path.join(corpus, name)
        if os.path.exists(path):
            frame = open(path, "rb").read()
            out["raw_" + name[:-4]] = bytes([0]) + raw(frame, aim_qp=qp)
    return out


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    target = os.path.join(here, "corpus_engine")
    os.makedirs(target, exist_ok=True)
    seeds = dict(SEEDS)
    seeds.update(raw_seeds(os.path.join(here, "corpus")))
    for name, data in sorted(seeds.items()):
        with open(os.path.join(target, name + ".bin"), "wb") as f:
            f.write(data)
    print(f"{len(seeds)} seeds in {target}", file=sys.stderr)


if __name__ == "__main__":
    main()
