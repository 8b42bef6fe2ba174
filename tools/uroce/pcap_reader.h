// Reads Ethernet frames from a pcap or pcapng file through libpcap.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>

struct pcap;

namespace uroce::tools {

struct CapturedFrame {
    std::span<const std::uint8_t> bytes;  // valid until the next call to next()
    std::uint32_t original_length = 0;   // on the wire; larger than bytes when the capture was cut short
};

class PcapReader {
public:
    // Throws std::runtime_error with libpcap's message when the file cannot
    // be opened or its link type is not Ethernet.
    explicit PcapReader(const std::string& path);
    ~PcapReader();
    PcapReader(const PcapReader&) = delete;
    PcapReader& operator=(const PcapReader&) = delete;

    // The next frame, or nothing at the end of the file. Throws
    // std::runtime_error when the file is corrupt.
    std::optional<CapturedFrame> next();

private:
    pcap* handle_ = nullptr;
    std::string path_;
};

}  // namespace uroce::tools
