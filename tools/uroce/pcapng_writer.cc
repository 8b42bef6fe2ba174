#include "pcapng_writer.h"

#include <cstring>

namespace uroce::tools {

namespace {

// Block types and option codes (pcapng sections 4.1-4.3).
constexpr std::uint32_t kSectionHeaderBlock = 0x0A0D0D0A;
constexpr std::uint32_t kInterfaceDescriptionBlock = 1;
constexpr std::uint32_t kEnhancedPacketBlock = 6;
constexpr std::uint32_t kByteOrderMagic = 0x1A2B3C4D;
constexpr std::uint16_t kOptEndOfOptions = 0;
constexpr std::uint16_t kOptComment = 1;
constexpr std::uint16_t kIfName = 2;
constexpr std::uint16_t kIfTsResol = 9;
constexpr std::uint16_t kEpbFlags = 2;
constexpr std::uint16_t kLinkTypeEthernet = 1;  // LINKTYPE_ETHERNET
// if_tsresol: 10^-9 s, timestamps in nanoseconds.
constexpr std::uint8_t kNanoseconds = 9;
// epb_flags bits 0-1: the direction (1 inbound, 2 outbound).
constexpr std::uint32_t kFlagInbound = 1;
constexpr std::uint32_t kFlagOutbound = 2;
// Snapshot length: frames are never cut short (jumbo frames fit).
constexpr std::uint32_t kSnapLength = 262144;

template <typename T>
void append(std::string& b, T value) {
    b.append(reinterpret_cast<const char*>(&value), sizeof(value));  // host byte order, as the magic says
}

void pad4(std::string& b) {
    b.append((4 - b.size() % 4) % 4, '\0');
}

void option(std::string& b, std::uint16_t code, std::string_view value) {
    append(b, code);
    append(b, static_cast<std::uint16_t>(value.size()));
    b.append(value);
    pad4(b);
}

// A block: type, total length, body (a multiple of 4), total length again.
std::string block(std::uint32_t type, const std::string& body) {
    std::string b;
    const auto total = static_cast<std::uint32_t>(12 + body.size());
    append(b, type);
    append(b, total);
    b += body;
    append(b, total);
    return b;
}

}  // namespace

PcapngWriter::PcapngWriter(std::FILE* out, std::string_view interface_name) : out_(out) {
    std::string shb;
    append(shb, kByteOrderMagic);
    append(shb, std::uint16_t{1});  // major version
    append(shb, std::uint16_t{0});  // minor version
    append(shb, std::int64_t{-1});  // section length: not given
    put(block(kSectionHeaderBlock, shb));

    std::string idb;
    append(idb, kLinkTypeEthernet);
    append(idb, std::uint16_t{0});
    append(idb, kSnapLength);
    option(idb, kIfName, interface_name);
    option(idb, kIfTsResol, std::string_view(reinterpret_cast<const char*>(&kNanoseconds), 1));
    append(idb, kOptEndOfOptions);
    append(idb, std::uint16_t{0});
    put(block(kInterfaceDescriptionBlock, idb));
}

bool PcapngWriter::write(std::uint64_t time_ns, std::span<const std::uint8_t> frame, FrameDirection direction,
                         std::string_view comment) {
    std::string epb;
    append(epb, std::uint32_t{0});  // interface 0
    append(epb, static_cast<std::uint32_t>(time_ns >> 32));
    append(epb, static_cast<std::uint32_t>(time_ns));
    append(epb, static_cast<std::uint32_t>(frame.size()));  // captured
    append(epb, static_cast<std::uint32_t>(frame.size()));  // on the wire
    epb.append(reinterpret_cast<const char*>(frame.data()), frame.size());
    pad4(epb);
    if (direction != FrameDirection::Unknown) {
        const std::uint32_t flags = direction == FrameDirection::Inbound ? kFlagInbound : kFlagOutbound;
        option(epb, kEpbFlags, std::string_view(reinterpret_cast<const char*>(&flags), sizeof(flags)));
    }
    if (!comment.empty()) {
        option(epb, kOptComment, comment);
    }
    if (direction != FrameDirection::Unknown || !comment.empty()) {
        append(epb, kOptEndOfOptions);
        append(epb, std::uint16_t{0});
    }
    return put(block(kEnhancedPacketBlock, epb));
}

bool PcapngWriter::put(const std::string& block_bytes) {
    if (!failed_ && std::fwrite(block_bytes.data(), 1, block_bytes.size(), out_) != block_bytes.size()) {
        failed_ = true;
    }
    return !failed_;
}

bool PcapngWriter::flush() {
    if (!failed_ && std::fflush(out_) != 0) {
        failed_ = true;
    }
    return !failed_;
}

}  // namespace uroce::tools
