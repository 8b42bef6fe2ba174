#include "engine/wqe.h"

#include <cstring>

namespace uroce::engine {

namespace {

bool allowed_for(qp::QpType type, WrOpcode op) {
    switch (type) {
        case qp::QpType::Rc:
        case qp::QpType::XrcIni:
            return true;
        case qp::QpType::XrcTgt:  // no send queue
            return false;
        case qp::QpType::Uc:  // no READ, no atomics (IBA table 38: UC has neither)
            return op == WrOpcode::Send || op == WrOpcode::SendWithImm || op == WrOpcode::RdmaWrite ||
                   op == WrOpcode::RdmaWriteWithImm || op == WrOpcode::LocalInv || op == WrOpcode::BindMw ||
                   op == WrOpcode::SendWithInv;
        case qp::QpType::Ud:  // datagrams are SENDs
            return op == WrOpcode::Send || op == WrOpcode::SendWithImm;
    }
    return false;
}

}  // namespace

WqeProblem fetch_send_wqe(const WorkRing& ring, std::uint32_t index, qp::QpType type,
                          std::vector<std::uint8_t>& scratch, SendWqe& out) {
    scratch.resize(ring.stride());
    ring.copy_slot(index, scratch.data());
    uroce_send_wqe w;
    std::memcpy(&w, scratch.data(), sizeof w);
    out.wr_id = w.wr_id;
    out.flags = w.send_flags;
    out.imm = w.imm_data;
    out.sge.clear();
    out.inline_data.clear();
    out.length = 0;
    out.started = false;
    out.packets = 0;
    out.done = false;
    out.status = WcStatus::Success;
    out.last_sent = false;
    out.received = 0;
    out.xrc_srqn = w.xrc_remote_srqn & 0xFFFFFF;  // XRCETH carries 24 bits
    if (w.opcode >= kWrOpcodeLimit) {
        return "unknown opcode";
    }
    out.opcode = static_cast<WrOpcode>(w.opcode);
    if (!allowed_for(type, out.opcode)) {
        return "opcode not allowed on this QP type";
    }
    out.is_inline = (w.send_flags & SendFlag::kInline) != 0;
    const std::size_t body = ring.stride() - sizeof(uroce_send_wqe);
    if (out.is_inline) {
        if (w.inline_len > ring.max_inline() || w.inline_len > body) {
            return "inline data larger than max_inline_data";
        }
        const auto* data = scratch.data() + sizeof(uroce_send_wqe);
        out.inline_data.assign(data, data + w.inline_len);
        out.length = w.inline_len;
    } else {
        if (w.num_sge > ring.max_sge() || std::size_t{w.num_sge} * sizeof(uroce_sge) > body) {
            return "more SGEs than max_send_sge";
        }
        for (std::uint32_t i = 0; i < w.num_sge; ++i) {
            uroce_sge s;
            std::memcpy(&s, scratch.data() + sizeof(uroce_send_wqe) + i * sizeof(uroce_sge), sizeof s);
            out.sge.push_back(Sge{s.addr, s.length, s.lkey});
            out.length += s.length;
        }
    }
    if (out.length > kMaxMessage) {
        return "message longer than 2^31 bytes";
    }
    switch (out.opcode) {
        case WrOpcode::RdmaWrite:
        case WrOpcode::RdmaWriteWithImm:
        case WrOpcode::RdmaRead:
            out.remote_addr = w.u.rdma.remote_addr;
            out.rkey = w.u.rdma.rkey;
            if (out.opcode == WrOpcode::RdmaRead && out.is_inline) {
                return "RDMA READ cannot be inline";
            }
            break;
        case WrOpcode::AtomicCmpAndSwp:
        case WrOpcode::AtomicFetchAndAdd:
            out.remote_addr = w.u.atomic.remote_addr;
            out.rkey = w.u.atomic.rkey;
            out.compare_add = w.u.atomic.compare_add;
            out.swap = w.u.atomic.swap;
            // ibv_post_send(3): one 8-byte SGE receives the original value.
            if (out.is_inline || out.length != 8) {
                return "atomic needs one 8-byte local buffer";
            }
            break;
        case WrOpcode::Send:
        case WrOpcode::SendWithImm:
        case WrOpcode::SendWithInv:
            if (type == qp::QpType::Ud) {
                out.ah = w.u.ud.ah;
                out.remote_qpn = w.u.ud.remote_qpn & qp::kQpnMask;
                out.remote_qkey = w.u.ud.remote_qkey;
            }
            break;
        case WrOpcode::LocalInv:
            break;
        case WrOpcode::BindMw:
            out.bind_addr = w.u.bind.addr;
            out.bind_length = w.u.bind.length;
            out.bind_mw_rkey = w.u.bind.mw_rkey;
            out.bind_mr_lkey = w.u.bind.mr_lkey;
            out.bind_access = w.u.bind.access;
            break;
    }
    return {};
}

WqeProblem fetch_recv_wqe(const WorkRing& ring, std::uint32_t index, std::vector<std::uint8_t>& scratch,
                          RecvWqe& out) {
    scratch.resize(ring.stride());
    ring.copy_slot(index, scratch.data());
    uroce_recv_wqe w;
    std::memcpy(&w, scratch.data(), sizeof w);
    out.wr_id = w.wr_id;
    out.sge.clear();
    out.capacity = 0;
    const std::size_t body = ring.stride() - sizeof(uroce_recv_wqe);
    if (w.num_sge > ring.max_sge() || std::size_t{w.num_sge} * sizeof(uroce_sge) > body) {
        return "more SGEs than max_recv_sge";
    }
    for (std::uint32_t i = 0; i < w.num_sge; ++i) {
        uroce_sge s;
        std::memcpy(&s, scratch.data() + sizeof(uroce_recv_wqe) + i * sizeof(uroce_sge), sizeof s);
        out.sge.push_back(Sge{s.addr, s.length, s.lkey});
        out.capacity += s.length;
    }
    return {};
}

WcOpcode wc_opcode_of(WrOpcode op) {
    switch (op) {
        case WrOpcode::RdmaWrite:
        case WrOpcode::RdmaWriteWithImm:
            return WcOpcode::RdmaWrite;
        case WrOpcode::RdmaRead:
            return WcOpcode::RdmaRead;
        case WrOpcode::AtomicCmpAndSwp:
            return WcOpcode::CompSwap;
        case WrOpcode::AtomicFetchAndAdd:
            return WcOpcode::FetchAdd;
        case WrOpcode::LocalInv:
            return WcOpcode::LocalInv;
        case WrOpcode::BindMw:
            return WcOpcode::BindMw;
        case WrOpcode::Send:
        case WrOpcode::SendWithImm:
        case WrOpcode::SendWithInv:
            return WcOpcode::Send;
    }
    return WcOpcode::Send;
}

}  // namespace uroce::engine
