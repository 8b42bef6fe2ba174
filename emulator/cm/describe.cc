#include "describe.h"

#include <fmt/format.h>

#include "mad.h"

namespace uroce::cm {

namespace {

struct Summarizer {
    MadSummary& s;

    void operator()(const ReqMsg& m) const {
        s.local_comm_id = m.local_comm_id;
        s.service_id = m.service_id;
        s.qpn = m.local_qpn;
        s.starting_psn = m.starting_psn;
    }
    void operator()(const MraMsg& m) const { ids(m.local_comm_id, m.remote_comm_id); }
    void operator()(const RejMsg& m) const {
        ids(m.local_comm_id, m.remote_comm_id);
        s.reject_reason = m.reason;
    }
    void operator()(const RepMsg& m) const {
        ids(m.local_comm_id, m.remote_comm_id);
        s.qpn = m.local_qpn;
        s.starting_psn = m.starting_psn;
    }
    void operator()(const RtuMsg& m) const { ids(m.local_comm_id, m.remote_comm_id); }
    void operator()(const DreqMsg& m) const {
        ids(m.local_comm_id, m.remote_comm_id);
        s.qpn = m.remote_qpn;
    }
    void operator()(const DrepMsg& m) const { ids(m.local_comm_id, m.remote_comm_id); }
    void operator()(const SidrReqMsg& m) const {
        s.local_comm_id = m.request_id;
        s.service_id = m.service_id;
    }
    void operator()(const SidrRepMsg& m) const {
        s.local_comm_id = m.request_id;
        s.service_id = m.service_id;
        s.qpn = m.qpn;
        s.sidr_status = m.status;
    }

    void ids(std::uint32_t local, std::uint32_t remote) const {
        s.local_comm_id = local;
        s.remote_comm_id = remote;
    }
};

}  // namespace

MadSummary summarize(const Mad& mad) {
    MadSummary s;
    s.message = attr_name(attr_of(mad.message));
    s.tid = mad.header.tid;
    std::visit(Summarizer{s}, mad.message);
    return s;
}

std::string describe(const MadSummary& s) {
    std::string out = fmt::format("CM {} tid=0x{:016x} local_comm_id=0x{:08x}", s.message, s.tid, s.local_comm_id);
    if (s.remote_comm_id) {
        out += fmt::format(" remote_comm_id=0x{:08x}", *s.remote_comm_id);
    }
    if (s.service_id) {
        out += fmt::format(" service_id=0x{:016x}", *s.service_id);
    }
    if (s.qpn) {
        out += fmt::format(" qpn=0x{:x}", *s.qpn);
    }
    if (s.starting_psn) {
        out += fmt::format(" psn=0x{:x}", *s.starting_psn);
    }
    if (s.reject_reason) {
        out += fmt::format(" reason={}", *s.reject_reason);
    }
    if (s.sidr_status) {
        out += fmt::format(" status={}", *s.sidr_status);
    }
    return out;
}

}  // namespace uroce::cm
