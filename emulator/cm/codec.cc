#include "codec.h"

#include <algorithm>
#include <type_traits>

#include "layout.h"

namespace uroce::cm {

namespace {

// One walk over a message's fields serves both directions: the reader fills
// the struct from the bytes, the writer the bytes from the struct. So the
// layout of each message is written down once (IBA table per message).
class Reader {
public:
    explicit Reader(std::span<const std::uint8_t, kMadSize> mad) : mad_(mad) {}

    template <typename T>
    void field(BitField f, T& v) {
        const std::uint64_t raw = get_field(mad_, f);
        if constexpr (std::is_same_v<T, bool>) {
            v = raw != 0;
        } else {
            v = static_cast<T>(raw);
        }
    }
    template <std::size_t N>
    void bytes(std::uint16_t offset, std::array<std::uint8_t, N>& out) {
        std::copy_n(mad_.begin() + offset, N, out.begin());
    }

private:
    std::span<const std::uint8_t, kMadSize> mad_;
};

class Writer {
public:
    explicit Writer(std::span<std::uint8_t, kMadSize> mad) : mad_(mad) {}

    template <typename T>
    void field(BitField f, T& v) {
        put_field(mad_, f, static_cast<std::uint64_t>(v));
    }
    template <std::size_t N>
    void bytes(std::uint16_t offset, std::array<std::uint8_t, N>& in) {
        std::copy_n(in.begin(), N, mad_.begin() + offset);
    }

private:
    std::span<std::uint8_t, kMadSize> mad_;
};

template <typename Io>
void walk_header(Io& io, MadHeader& h) {
    using namespace layout::hdr;
    io.field(kBaseVersion, h.base_version);
    io.field(kMgmtClass, h.mgmt_class);
    io.field(kClassVersion, h.class_version);
    io.field(kMethod, h.method);
    io.field(kStatus, h.status);
    io.field(kClassSpecific, h.class_specific);
    io.field(kTid, h.tid);
    io.field(kAttrId, h.attr_id);
    io.field(kAttrMod, h.attr_mod);
}

template <typename Io>
void walk_path(Io& io, std::uint16_t base, PathInfo& p) {
    using namespace layout::path;
    io.field(at(base, kLocalLid, 0, 16), p.local_lid);
    io.field(at(base, kRemoteLid, 0, 16), p.remote_lid);
    io.bytes(static_cast<std::uint16_t>(layout::kData + base + kLocalGid), p.local_gid);
    io.bytes(static_cast<std::uint16_t>(layout::kData + base + kRemoteGid), p.remote_gid);
    io.field(at(base, kFlowLabel, 0, 20), p.flow_label);
    io.field(at(base, kFlowLabel + 3, 2, 6), p.packet_rate);
    io.field(at(base, kTrafficClass, 0, 8), p.traffic_class);
    io.field(at(base, kHopLimit, 0, 8), p.hop_limit);
    io.field(at(base, kSlByte, 0, 4), p.sl);
    io.field(at(base, kSlByte, 4, 1), p.subnet_local);
    io.field(at(base, kAckTimeoutByte, 0, 5), p.local_ack_timeout);
}

template <typename Io>
void walk(Io& io, ReqMsg& m) {
    using namespace layout::req;
    io.field(kLocalCommId, m.local_comm_id);
    io.field(kVendorId, m.vendor_id);
    io.field(kServiceId, m.service_id);
    io.field(kLocalCaGuid, m.local_ca_guid);
    io.field(kLocalQkey, m.local_qkey);
    io.field(kLocalQpn, m.local_qpn);
    io.field(kResponderResources, m.responder_resources);
    io.field(kLocalEecn, m.local_eecn);
    io.field(kInitiatorDepth, m.initiator_depth);
    io.field(kRemoteEecn, m.remote_eecn);
    io.field(kRemoteCmResponseTimeout, m.remote_cm_response_timeout);
    io.field(kTransportType, m.transport_type);
    io.field(kFlowControl, m.end_to_end_flow_control);
    io.field(kStartingPsn, m.starting_psn);
    io.field(kLocalCmResponseTimeout, m.local_cm_response_timeout);
    io.field(kRetryCount, m.retry_count);
    io.field(kPartitionKey, m.partition_key);
    io.field(kPathMtu, m.path_mtu);
    io.field(kRdcExists, m.rdc_exists);
    io.field(kRnrRetryCount, m.rnr_retry_count);
    io.field(kMaxCmRetries, m.max_cm_retries);
    io.field(kSrq, m.srq);
    io.field(kExtendedTransportType, m.extended_transport_type);
    walk_path(io, kPrimaryPath, m.primary);
    walk_path(io, kAlternatePath, m.alternate);
    io.field(kSapSupported, m.sap_supported);
    io.bytes(kPrivateData, m.private_data);
}

template <typename Io>
void walk(Io& io, MraMsg& m) {
    using namespace layout::mra;
    io.field(kLocalCommId, m.local_comm_id);
    io.field(kRemoteCommId, m.remote_comm_id);
    io.field(kMessageMraed, m.message_mraed);
    io.field(kServiceTimeout, m.service_timeout);
    io.bytes(kPrivateData, m.private_data);
}

template <typename Io>
void walk(Io& io, RejMsg& m) {
    using namespace layout::rej;
    io.field(kLocalCommId, m.local_comm_id);
    io.field(kRemoteCommId, m.remote_comm_id);
    io.field(kMessageRejected, m.message_rejected);
    io.field(kInfoLength, m.reject_info_length);
    io.field(kReason, m.reason);
    io.bytes(kAri, m.ari);
    io.bytes(kPrivateData, m.private_data);
}

template <typename Io>
void walk(Io& io, RepMsg& m) {
    using namespace layout::rep;
    io.field(kLocalCommId, m.local_comm_id);
    io.field(kRemoteCommId, m.remote_comm_id);
    io.field(kLocalQkey, m.local_qkey);
    io.field(kLocalQpn, m.local_qpn);
    io.field(kLocalEecn, m.local_eecn);
    io.field(kStartingPsn, m.starting_psn);
    io.field(kResponderResources, m.responder_resources);
    io.field(kInitiatorDepth, m.initiator_depth);
    io.field(kTargetAckDelay, m.target_ack_delay);
    io.field(kFailoverAccepted, m.failover_accepted);
    io.field(kFlowControl, m.end_to_end_flow_control);
    io.field(kRnrRetryCount, m.rnr_retry_count);
    io.field(kSrq, m.srq);
    io.field(kLocalCaGuid, m.local_ca_guid);
    // The 24-bit vendor ID is spread over three bytes (table 110).
    std::uint8_t high = static_cast<std::uint8_t>(m.vendor_id >> 16);
    std::uint8_t mid = static_cast<std::uint8_t>(m.vendor_id >> 8);
    std::uint8_t low = static_cast<std::uint8_t>(m.vendor_id);
    io.field(kVendorIdHigh, high);
    io.field(kVendorIdMid, mid);
    io.field(kVendorIdLow, low);
    m.vendor_id = (std::uint32_t{high} << 16) | (std::uint32_t{mid} << 8) | low;
    io.bytes(kPrivateData, m.private_data);
}

template <typename Io>
void walk(Io& io, RtuMsg& m) {
    using namespace layout::rtu;
    io.field(kLocalCommId, m.local_comm_id);
    io.field(kRemoteCommId, m.remote_comm_id);
    io.bytes(kPrivateData, m.private_data);
}

template <typename Io>
void walk(Io& io, DreqMsg& m) {
    using namespace layout::dreq;
    io.field(kLocalCommId, m.local_comm_id);
    io.field(kRemoteCommId, m.remote_comm_id);
    io.field(kRemoteQpn, m.remote_qpn);
    io.bytes(kPrivateData, m.private_data);
}

template <typename Io>
void walk(Io& io, DrepMsg& m) {
    using namespace layout::drep;
    io.field(kLocalCommId, m.local_comm_id);
    io.field(kRemoteCommId, m.remote_comm_id);
    io.bytes(kPrivateData, m.private_data);
}

template <typename Io>
void walk(Io& io, SidrReqMsg& m) {
    using namespace layout::sidr_req;
    io.field(kRequestId, m.request_id);
    io.field(kPartitionKey, m.partition_key);
    io.field(kServiceId, m.service_id);
    io.bytes(kPrivateData, m.private_data);
}

template <typename Io>
void walk(Io& io, SidrRepMsg& m) {
    using namespace layout::sidr_rep;
    io.field(kRequestId, m.request_id);
    io.field(kStatus, m.status);
    io.field(kInfoLength, m.info_length);
    std::uint16_t high = static_cast<std::uint16_t>(m.vendor_id >> 8);
    std::uint8_t low = static_cast<std::uint8_t>(m.vendor_id);
    io.field(kVendorIdHigh, high);
    io.field(kVendorIdLow, low);
    m.vendor_id = (std::uint32_t{high} << 8) | low;
    io.field(kQpn, m.qpn);
    io.field(kServiceId, m.service_id);
    io.field(kQkey, m.qkey);
    io.bytes(kInfo, m.info);
    io.bytes(kPrivateData, m.private_data);
}

template <typename M>
Message read_message(std::span<const std::uint8_t, kMadSize> mad) {
    M m{};
    Reader r(mad);
    walk(r, m);
    return m;
}

// The checks a receiver makes on a message's own fields.
CmParseStatus check_fields(const Message& msg) {
    if (const auto* req = std::get_if<ReqMsg>(&msg)) {
        // XRC is the one extended transport (IBA 14.6.3.1, extended type 1).
        const bool known = req->transport_type == TransportType::Rc || req->transport_type == TransportType::Uc ||
                           (req->transport_type == TransportType::Extended && req->extended_transport_type == 1);
        if (!known) {
            return CmParseStatus::ReqBadTransportType;
        }
        if (req->path_mtu < 1 || req->path_mtu > 5) {  // IB MTU codes: 1 = 256 bytes .. 5 = 4096
            return CmParseStatus::ReqBadMtu;
        }
    } else if (const auto* mra = std::get_if<MraMsg>(&msg)) {
        if (static_cast<unsigned>(mra->message_mraed) > 2) {
            return CmParseStatus::ReservedMessageRef;
        }
    } else if (const auto* rej = std::get_if<RejMsg>(&msg)) {
        if (static_cast<unsigned>(rej->message_rejected) > 2) {
            return CmParseStatus::ReservedMessageRef;
        }
        if (rej->reject_info_length > kRejAriSize) {
            return CmParseStatus::RejBadInfoLength;
        }
    } else if (const auto* sidr = std::get_if<SidrRepMsg>(&msg)) {
        if (sidr->info_length > kSidrRepInfoSize) {
            return CmParseStatus::SidrRepBadInfoLength;
        }
    }
    return CmParseStatus::Ok;
}

}  // namespace

AttrId attr_of(const Message& m) {
    struct Visitor {
        AttrId operator()(const ReqMsg&) const { return AttrId::Req; }
        AttrId operator()(const MraMsg&) const { return AttrId::Mra; }
        AttrId operator()(const RejMsg&) const { return AttrId::Rej; }
        AttrId operator()(const RepMsg&) const { return AttrId::Rep; }
        AttrId operator()(const RtuMsg&) const { return AttrId::Rtu; }
        AttrId operator()(const DreqMsg&) const { return AttrId::Dreq; }
        AttrId operator()(const DrepMsg&) const { return AttrId::Drep; }
        AttrId operator()(const SidrReqMsg&) const { return AttrId::SidrReq; }
        AttrId operator()(const SidrRepMsg&) const { return AttrId::SidrRep; }
    };
    return std::visit(Visitor{}, m);
}

MadHeader cm_header(std::uint64_t tid) {
    MadHeader h;
    h.tid = tid;
    return h;
}

MadParseResult parse_mad(std::span<const std::uint8_t> bytes) {
    MadParseResult r;
    if (bytes.size() != kMadSize) {
        r.status = CmParseStatus::BadMadLength;
        return r;
    }
    const std::span<const std::uint8_t, kMadSize> mad(bytes.data(), kMadSize);
    Reader reader(mad);
    walk_header(reader, r.mad.header);
    const MadHeader& h = r.mad.header;
    if (h.base_version != kMadBaseVersion) {
        r.status = CmParseStatus::BadBaseVersion;
    } else if (h.mgmt_class != kCmMgmtClass) {
        r.status = CmParseStatus::NotCmClass;
    } else if (h.class_version != kCmClassVersion) {
        r.status = CmParseStatus::BadClassVersion;
    } else if (h.method != kMadMethodSend) {
        r.status = CmParseStatus::BadMethod;
    }
    if (r.status != CmParseStatus::Ok) {
        return r;
    }
    switch (static_cast<AttrId>(h.attr_id)) {
    case AttrId::Req: r.mad.message = read_message<ReqMsg>(mad); break;
    case AttrId::Mra: r.mad.message = read_message<MraMsg>(mad); break;
    case AttrId::Rej: r.mad.message = read_message<RejMsg>(mad); break;
    case AttrId::Rep: r.mad.message = read_message<RepMsg>(mad); break;
    case AttrId::Rtu: r.mad.message = read_message<RtuMsg>(mad); break;
    case AttrId::Dreq: r.mad.message = read_message<DreqMsg>(mad); break;
    case AttrId::Drep: r.mad.message = read_message<DrepMsg>(mad); break;
    case AttrId::SidrReq: r.mad.message = read_message<SidrReqMsg>(mad); break;
    case AttrId::SidrRep: r.mad.message = read_message<SidrRepMsg>(mad); break;
    case AttrId::ClassPortInfo:
    case AttrId::Lap:
    case AttrId::Apr: r.status = CmParseStatus::UnsupportedAttribute; return r;
    default: r.status = CmParseStatus::UnknownAttribute; return r;
    }
    r.status = check_fields(r.mad.message);
    return r;
}

MadBytes build_mad(const Mad& mad) {
    MadBytes out{};
    Writer w{std::span<std::uint8_t, kMadSize>(out)};
    MadHeader h = mad.header;
    h.attr_id = static_cast<std::uint16_t>(attr_of(mad.message));
    walk_header(w, h);
    Message copy = mad.message;
    std::visit([&w](auto& m) { walk(w, m); }, copy);
    return out;
}

}  // namespace uroce::cm
