// Work requests as the engine keeps them: validated copies of what a client
// wrote into its rings (abi/rings.h). fetch_send_wqe / fetch_recv_wqe copy a
// slot out of shared memory first and then check the copy, so a client
// rewriting the slot meanwhile cannot change what was checked.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "common/wc_status.h"
#include "engine/rings.h"
#include "engine/verbs_codes.h"
#include "qp/qp_types.h"
#include "wire/psn.h"

namespace uroce::engine {

struct Sge {
    std::uint64_t addr = 0;
    std::uint32_t length = 0;
    std::uint32_t lkey = 0;
};

// A message may not exceed 2^31 bytes (IBA 9.4.1: DMA length is 32 bits,
// and ibv_port_attr.max_msg_sz reports 2^31).
inline constexpr std::uint64_t kMaxMessage = 1ull << 31;

struct SendWqe {
    std::uint64_t wr_id = 0;
    WrOpcode opcode = WrOpcode::Send;
    std::uint32_t flags = 0;
    std::uint32_t imm = 0;  // as on the wire (network order in the WQE)
    std::uint64_t remote_addr = 0;
    std::uint32_t rkey = 0;
    std::uint64_t compare_add = 0;
    std::uint64_t swap = 0;
    std::uint32_t ah = 0;
    std::uint32_t remote_qpn = 0;
    std::uint32_t remote_qkey = 0;
    std::uint32_t xrc_srqn = 0;  // XRC initiator: the remote SRQ (XRCETH)
    std::uint64_t bind_addr = 0;
    std::uint64_t bind_length = 0;
    std::uint32_t bind_mw_rkey = 0;
    std::uint32_t bind_mr_lkey = 0;
    std::uint32_t bind_access = 0;
    std::vector<Sge> sge;
    std::vector<std::uint8_t> inline_data;
    bool is_inline = false;
    std::uint64_t length = 0;  // bytes the message carries (READ: bytes asked for)

    // Transmission state.
    bool started = false;        // PSNs assigned
    wire::Psn first_psn{};
    std::uint32_t packets = 0;   // PSNs the WQE uses (READ: response packets)
    bool done = false;           // may retire
    WcStatus status = WcStatus::Success;
    bool last_sent = false;      // every packet went out at least once
    std::uint32_t received = 0;  // READ: response packets received in order

    [[nodiscard]] wire::Psn last_psn() const { return first_psn + (packets - 1); }
    [[nodiscard]] bool signaled(bool sq_sig_all) const {
        return sq_sig_all || (flags & SendFlag::kSignaled) != 0 || status != WcStatus::Success;
    }
    [[nodiscard]] bool is_read_or_atomic() const {
        return opcode == WrOpcode::RdmaRead || opcode == WrOpcode::AtomicCmpAndSwp ||
               opcode == WrOpcode::AtomicFetchAndAdd;
    }
};

struct RecvWqe {
    std::uint64_t wr_id = 0;
    std::vector<Sge> sge;
    std::uint64_t capacity = 0;  // sum of SGE lengths
};

// Why a WQE was refused; empty when it is good.
using WqeProblem = std::string_view;

// Copies slot `index` of `ring` and validates it for a QP of `type`.
WqeProblem fetch_send_wqe(const WorkRing& ring, std::uint32_t index, qp::QpType type,
                          std::vector<std::uint8_t>& scratch, SendWqe& out);
WqeProblem fetch_recv_wqe(const WorkRing& ring, std::uint32_t index, std::vector<std::uint8_t>& scratch,
                          RecvWqe& out);

// The work-completion opcode a send WQE completes with.
[[nodiscard]] WcOpcode wc_opcode_of(WrOpcode op);

}  // namespace uroce::engine
