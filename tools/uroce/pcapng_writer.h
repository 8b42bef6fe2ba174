// Writes a capture as pcapng (the pcapng specification, IETF draft
// draft-ietf-opsawg-pcapng, sections 4.1-4.3): one section, one Ethernet
// interface with nanosecond timestamps, one Enhanced Packet Block per frame
// carrying its direction (epb_flags) and, for a dropped frame, a comment
// saying why (opt_comment).
//
// Written here rather than through libpcap: libpcap 1.10 (Debian 12) writes
// only the old pcap format (pcap_dump_open), which has no per-packet
// comments or direction, and uroce capture marks dropped frames with them.
// Reading stays with libpcap (pcap_reader.h), which reads pcapng.
#pragma once

#include <cstdint>
#include <cstdio>
#include <span>
#include <string>
#include <string_view>

namespace uroce::tools {

enum class FrameDirection : std::uint8_t { Unknown, Inbound, Outbound };

class PcapngWriter {
public:
    // Writes the section and interface headers to `out` (which the caller
    // owns); `interface_name` names the interface (the device).
    PcapngWriter(std::FILE* out, std::string_view interface_name);

    // One frame; `comment` empty for none. False when the output failed
    // (errno says why: EPIPE when a reader on a pipe went away).
    bool write(std::uint64_t time_ns, std::span<const std::uint8_t> frame, FrameDirection direction,
               std::string_view comment);
    // False when the output failed.
    bool flush();

private:
    bool put(const std::string& block);

    std::FILE* out_;
    bool failed_ = false;
};

}  // namespace uroce::tools
