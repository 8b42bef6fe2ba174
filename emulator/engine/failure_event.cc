#include "engine/failure_event.h"

#include <fmt/format.h>

#include <algorithm>

#include "common/wc_status.h"
#include "engine/verbs_codes.h"
#include "wire/describe.h"
#include "wire/opcode.h"

namespace uroce::engine {

std::string_view nak_name(std::int32_t code) {
    switch (code) {
        case 0:
            return "PSN sequence error";
        case 1:
            return "invalid request";
        case 2:
            return "remote access error";
        case 3:
            return "remote operational error";
        case 4:
            return "invalid RD request";
        default:
            return "reserved NAK code";
    }
}

namespace {

std::string_view wc_opcode_words(std::uint32_t opcode) {
    switch (static_cast<WcOpcode>(opcode)) {
        case WcOpcode::Send:
            return "SEND";
        case WcOpcode::RdmaWrite:
            return "RDMA WRITE";
        case WcOpcode::RdmaRead:
            return "RDMA READ";
        case WcOpcode::CompSwap:
            return "ATOMIC compare-and-swap";
        case WcOpcode::FetchAdd:
            return "ATOMIC fetch-and-add";
        case WcOpcode::BindMw:
            return "BIND MW";
        case WcOpcode::LocalInv:
            return "LOCAL INV";
        case WcOpcode::Recv:
            return "RECV";
        case WcOpcode::RecvRdmaWithImm:
            return "RECV (RDMA WRITE with immediate)";
    }
    return "?";
}

// The remote right a request's opcode needs, in words.
std::string_view right_words(std::uint32_t bth_opcode) {
    switch (wire::opcode_info(static_cast<std::uint8_t>(bth_opcode)).operation) {
        case wire::Operation::RdmaReadRequest:
            return "REMOTE_READ";
        case wire::Operation::CompareSwap:
        case wire::Operation::FetchAdd:
            return "REMOTE_ATOMIC";
        default:
            return "REMOTE_WRITE";
    }
}

wire::Gid gid_of(const uroce_explain_record& r) {
    wire::Gid g{};
    std::copy(std::begin(r.peer_gid), std::end(r.peer_gid), g.begin());
    return g;
}

std::string region(const uroce_explain_record& r) {
    return fmt::format("[0x{:x}, +{})", r.region_start, r.region_length);
}

std::string history(const uroce_explain_record& r) {
    if ((r.flags & UROCE_EXPLAIN_HISTORY) == 0) {
        return {};
    }
    return fmt::format("; the MR was {} (access 0x{:x}), registered at {} ns, deregistered at {} ns (client's "
                       "CLOCK_MONOTONIC)",
                       region(r), r.region_access, r.registered_ns, r.deregistered_ns);
}

// Why the responder refused (or, for a stale access, what it saw).
std::string refusal_reason(const uroce_explain_record& r) {
    const bool known = (r.flags & UROCE_EXPLAIN_REGION_KNOWN) != 0;
    switch (static_cast<FailureCheck>(r.check)) {
        case FailureCheck::QpAccessNotEnabled:
            return fmt::format("the QP's qp_access_flags lack {}", right_words(r.opcode));
        case FailureCheck::KeyNotFound:
            return fmt::format("key not found: no MR, memory window or relaxed MR answers to rkey 0x{:08x}", r.rkey);
        case FailureCheck::KeyByteStale:
            return fmt::format("key byte stale: index 0x{:06x} of rkey 0x{:08x} belongs to a later registration "
                               "(key byte 0x{:02x} is an earlier one's)",
                               r.rkey >> 8, r.rkey, r.rkey & 0xFF);
        case FailureCheck::WindowNotBound:
            return "the rkey names a memory window that is not bound";
        case FailureCheck::WindowWrongQp:
            return "the type 2 memory window is bound to another QP";
        case FailureCheck::RelaxedAfterDereg:
            return fmt::format("relaxed MR used after deregistration{}{}",
                               r.kind == static_cast<std::uint32_t>(FailureKind::StaleAccess)
                                   ? " (not yet invalidated, so the access went through)"
                                   : " (already invalidated)",
                               history(r));
        case FailureCheck::PdMismatch:
            return fmt::format("wrong PD: the region is in PD {}, the QP in PD {}", r.region_pd, r.qp_pd);
        case FailureCheck::NoRemoteRead:
        case FailureCheck::NoRemoteWrite:
        case FailureCheck::NoRemoteAtomic:
            return fmt::format("no {} right: the region {} grants access 0x{:x}", right_words(r.opcode),
                               known ? region(r) : std::string("?"), r.region_access);
        case FailureCheck::AtomicMisaligned:
            return fmt::format("atomic of {} bytes at 0x{:x}: not 8 bytes at an 8-byte aligned address", r.length,
                               r.va);
        case FailureCheck::OutOfRange:
            return fmt::format("out of range by {} bytes: [0x{:x}, +{}) {} the region {}", r.overrun, r.va, r.length,
                               (r.flags & UROCE_EXPLAIN_BEFORE_START) != 0 ? "starts before" : "ends past",
                               known ? region(r) : std::string("?"));
        case FailureCheck::OdpFault:
            return "the on-demand MR's pages are not mapped now";
        case FailureCheck::InvalidRequest:
            return "invalid request: the opcode sequence, the QP's rights or the lengths";
        case FailureCheck::RemoteOperational:
            return "the responder could not read or write its client's memory";
        default:
            return fmt::format("{}", check_name(r.check));
    }
}

std::string outcome(const uroce_explain_record& r) {
    if (r.nak == UROCE_EXPLAIN_NO_NAK) {
        return "not NAKed (UC: the message is lost)";
    }
    return fmt::format("NAK {} (code {}), the requester's work request completes with {}", nak_name(r.nak), r.nak,
                       to_string(static_cast<WcStatus>(r.wc_status)));
}

std::string request(const uroce_explain_record& r) {
    return fmt::format("{} psn 0x{:06x} from {} qp 0x{:06x}: {} bytes at 0x{:x} rkey 0x{:08x}",
                       wire::opcode_info(static_cast<std::uint8_t>(r.opcode)).name_view(), r.psn,
                       wire::ip_to_string(gid_of(r)), r.remote_qpn, r.length, r.va, r.rkey);
}

// Why a work request completed in error.
std::string completion_reason(const uroce_explain_record& r) {
    switch (static_cast<FailureCheck>(r.check)) {
        case FailureCheck::PeerNak:
            return fmt::format("peer refused: {} (NAK code {}, psn 0x{:06x}); `uroce explain` on the peer says why",
                               nak_name(r.nak), r.nak, r.psn);
        case FailureCheck::RetryExceeded:
            return "no ACK from the peer after retry_cnt retransmissions";
        case FailureCheck::RnrRetryExceeded:
            return "the peer had no receive WQE (RNR NAK) rnr_retry times";
        case FailureCheck::LocalProtection:
            return "an SGE failed its lkey check (no such MR, another PD, no LOCAL_WRITE, or out of range)";
        case FailureCheck::LocalLength:
            return "the message does not fit the work request's buffers";
        case FailureCheck::LocalQpOperation:
            return "a malformed work request, or one the QP cannot do";
        case FailureCheck::BadResponse:
            return "the peer's response does not match the request";
        case FailureCheck::Flushed:
            return r.count > 1 ? fmt::format("the QP is in the error state: {} work requests flushed", r.count)
                               : std::string("the QP is in the error state: flushed");
        case FailureCheck::MwBind:
            return "the memory window bind failed";
        case FailureCheck::InvalidRequest:
            return "the SEND does not fit the receive WQE (the sender got an invalid request NAK)";
        case FailureCheck::RemoteOperational:
            return "the message could not be written into the receive buffers";
        default:
            return "error status";
    }
}

}  // namespace

std::string_view kind_name(std::uint32_t kind) {
    return kind < kFailureKindCount ? kFailureKindName[kind] : std::string_view("unknown");
}

std::string_view check_name(std::uint32_t check) {
    return check < kFailureCheckCount ? kFailureCheckName[check] : std::string_view("unknown");
}

std::string opcode_name(const uroce_explain_record& r) {
    if (r.kind == static_cast<std::uint32_t>(FailureKind::ErrorCompletion)) {
        return std::string(wc_opcode_words(r.opcode));
    }
    return std::string(wire::opcode_info(static_cast<std::uint8_t>(r.opcode)).name_view());
}

std::string describe(const uroce_explain_record& r) {
    switch (static_cast<FailureKind>(r.kind)) {
        case FailureKind::RequestRefused:
            return fmt::format("qp 0x{:06x} refused {}: {}; {}", r.qpn, request(r), refusal_reason(r), outcome(r));
        case FailureKind::StaleAccess:
            return fmt::format("qp 0x{:06x} allowed {}: {}", r.qpn, request(r), refusal_reason(r));
        case FailureKind::ErrorCompletion: {
            const bool send = (r.flags & UROCE_EXPLAIN_SEND_QUEUE) != 0;
            std::string what = fmt::format("{} WQE wr_id 0x{:x} ({}", send ? "send" : "receive", r.wr_id,
                                           wc_opcode_words(r.opcode));
            if (send && r.rkey != 0) {
                what += fmt::format(", {} bytes at 0x{:x} rkey 0x{:08x}", r.length, r.va, r.rkey);
            }
            return fmt::format("qp 0x{:06x} (peer {} qp 0x{:06x}) {}) completed with {}: {}", r.qpn,
                               wire::ip_to_string(gid_of(r)), r.remote_qpn, what,
                               to_string(static_cast<WcStatus>(r.wc_status)), completion_reason(r));
        }
        case FailureKind::Count:
            break;
    }
    return fmt::format("unknown record kind {}", r.kind);
}

}  // namespace uroce::engine
