// Where each field of each CM message sits in the 256-byte MAD (IBA vol. 1,
// 12.6.5-12.6.11, tables 106-120; offsets here count from the start of the
// MAD, so the IBA's message offsets are shifted by the 24-byte MAD header).
#pragma once

#include "bit_field.h"

namespace uroce::cm::layout {

constexpr std::uint16_t kData = kMadHeaderSize;  // message byte 0

constexpr BitField f(std::uint16_t msg_byte, std::uint8_t bit, std::uint8_t width) {
    return BitField{static_cast<std::uint16_t>(kData + msg_byte), bit, width};
}

// The common MAD header (IBA 13.4.2).
namespace hdr {
constexpr BitField kBaseVersion{0, 0, 8};
constexpr BitField kMgmtClass{1, 0, 8};
constexpr BitField kClassVersion{2, 0, 8};
constexpr BitField kMethod{3, 0, 8};
constexpr BitField kStatus{4, 0, 16};
constexpr BitField kClassSpecific{6, 0, 16};
constexpr BitField kTid{8, 0, 64};
constexpr BitField kAttrId{16, 0, 16};
constexpr BitField kAttrMod{20, 0, 32};
}  // namespace hdr

// Table 106: REQ.
namespace req {
constexpr BitField kLocalCommId = f(0, 0, 32);
constexpr BitField kVendorId = f(5, 0, 24);
constexpr BitField kServiceId = f(8, 0, 64);
constexpr BitField kLocalCaGuid = f(16, 0, 64);
constexpr BitField kLocalQkey = f(28, 0, 32);
constexpr BitField kLocalQpn = f(32, 0, 24);
constexpr BitField kResponderResources = f(35, 0, 8);
constexpr BitField kLocalEecn = f(36, 0, 24);
constexpr BitField kInitiatorDepth = f(39, 0, 8);
constexpr BitField kRemoteEecn = f(40, 0, 24);
constexpr BitField kRemoteCmResponseTimeout = f(43, 0, 5);
constexpr BitField kTransportType = f(43, 5, 2);
constexpr BitField kFlowControl = f(43, 7, 1);
constexpr BitField kStartingPsn = f(44, 0, 24);
constexpr BitField kLocalCmResponseTimeout = f(47, 0, 5);
constexpr BitField kRetryCount = f(47, 5, 3);
constexpr BitField kPartitionKey = f(48, 0, 16);
constexpr BitField kPathMtu = f(50, 0, 4);
constexpr BitField kRdcExists = f(50, 4, 1);
constexpr BitField kRnrRetryCount = f(50, 5, 3);
constexpr BitField kMaxCmRetries = f(51, 0, 4);
constexpr BitField kSrq = f(51, 4, 1);
constexpr BitField kExtendedTransportType = f(51, 5, 3);
// A path: primary at message byte 52, alternate at 96 (44 bytes each).
constexpr std::uint16_t kPrimaryPath = 52;
constexpr std::uint16_t kAlternatePath = 96;
constexpr BitField kSapSupported = f(139, 5, 1);
constexpr std::uint16_t kPrivateData = kData + 140;
}  // namespace req

// One REQ path, relative to its first byte (table 106).
namespace path {
constexpr BitField at(std::uint16_t base, std::uint16_t off, std::uint8_t bit, std::uint8_t width) {
    return f(static_cast<std::uint16_t>(base + off), bit, width);
}
constexpr std::uint16_t kLocalLid = 0;
constexpr std::uint16_t kRemoteLid = 2;
constexpr std::uint16_t kLocalGid = 4;
constexpr std::uint16_t kRemoteGid = 20;
constexpr std::uint16_t kFlowLabel = 36;   // 20 bits, then 6 reserved, then packet rate (6)
constexpr std::uint16_t kTrafficClass = 40;
constexpr std::uint16_t kHopLimit = 41;
constexpr std::uint16_t kSlByte = 42;      // SL (4), subnet local (1)
constexpr std::uint16_t kAckTimeoutByte = 43;  // local ACK timeout (5)
}  // namespace path

// Table 107: MRA.
namespace mra {
constexpr BitField kLocalCommId = f(0, 0, 32);
constexpr BitField kRemoteCommId = f(4, 0, 32);
constexpr BitField kMessageMraed = f(8, 0, 2);
constexpr BitField kServiceTimeout = f(9, 0, 5);
constexpr std::uint16_t kPrivateData = kData + 10;
}  // namespace mra

// Table 108: REJ.
namespace rej {
constexpr BitField kLocalCommId = f(0, 0, 32);
constexpr BitField kRemoteCommId = f(4, 0, 32);
constexpr BitField kMessageRejected = f(8, 0, 2);
constexpr BitField kInfoLength = f(9, 0, 7);
constexpr BitField kReason = f(10, 0, 16);
constexpr std::uint16_t kAri = kData + 12;
constexpr std::uint16_t kPrivateData = kData + 84;
}  // namespace rej

// Table 110: REP.
namespace rep {
constexpr BitField kLocalCommId = f(0, 0, 32);
constexpr BitField kRemoteCommId = f(4, 0, 32);
constexpr BitField kLocalQkey = f(8, 0, 32);
constexpr BitField kLocalQpn = f(12, 0, 24);
constexpr BitField kVendorIdHigh = f(15, 0, 8);
constexpr BitField kLocalEecn = f(16, 0, 24);
constexpr BitField kVendorIdMid = f(19, 0, 8);
constexpr BitField kStartingPsn = f(20, 0, 24);
constexpr BitField kVendorIdLow = f(23, 0, 8);
constexpr BitField kResponderResources = f(24, 0, 8);
constexpr BitField kInitiatorDepth = f(25, 0, 8);
constexpr BitField kTargetAckDelay = f(26, 0, 5);
constexpr BitField kFailoverAccepted = f(26, 5, 2);
constexpr BitField kFlowControl = f(26, 7, 1);
constexpr BitField kRnrRetryCount = f(27, 0, 3);
constexpr BitField kSrq = f(27, 3, 1);
constexpr BitField kLocalCaGuid = f(28, 0, 64);
constexpr std::uint16_t kPrivateData = kData + 36;
}  // namespace rep

// Tables 111-113: RTU, DREQ, DREP.
namespace rtu {
constexpr BitField kLocalCommId = f(0, 0, 32);
constexpr BitField kRemoteCommId = f(4, 0, 32);
constexpr std::uint16_t kPrivateData = kData + 8;
}  // namespace rtu
namespace dreq {
constexpr BitField kLocalCommId = f(0, 0, 32);
constexpr BitField kRemoteCommId = f(4, 0, 32);
constexpr BitField kRemoteQpn = f(8, 0, 24);
constexpr std::uint16_t kPrivateData = kData + 12;
}  // namespace dreq
namespace drep {
constexpr BitField kLocalCommId = f(0, 0, 32);
constexpr BitField kRemoteCommId = f(4, 0, 32);
constexpr std::uint16_t kPrivateData = kData + 8;
}  // namespace drep

// Tables 119-120: SIDR_REQ, SIDR_REP.
namespace sidr_req {
constexpr BitField kRequestId = f(0, 0, 32);
constexpr BitField kPartitionKey = f(4, 0, 16);
constexpr BitField kServiceId = f(8, 0, 64);
constexpr std::uint16_t kPrivateData = kData + 16;
}  // namespace sidr_req
namespace sidr_rep {
constexpr BitField kRequestId = f(0, 0, 32);
constexpr BitField kStatus = f(4, 0, 8);
constexpr BitField kInfoLength = f(5, 0, 8);
constexpr BitField kVendorIdHigh = f(6, 0, 16);
constexpr BitField kQpn = f(8, 0, 24);
constexpr BitField kVendorIdLow = f(11, 0, 8);
constexpr BitField kServiceId = f(12, 0, 64);
constexpr BitField kQkey = f(20, 0, 32);
constexpr std::uint16_t kInfo = kData + 24;
constexpr std::uint16_t kPrivateData = kData + 96;
}  // namespace sidr_rep

}  // namespace uroce::cm::layout
