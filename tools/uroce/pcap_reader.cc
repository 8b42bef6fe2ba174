#include "pcap_reader.h"

#include <pcap/pcap.h>

#include <stdexcept>

namespace uroce::tools {

PcapReader::PcapReader(const std::string& path) : path_(path) {
    char err[PCAP_ERRBUF_SIZE] = {};
    handle_ = pcap_open_offline(path.c_str(), err);
    if (handle_ == nullptr) {
        throw std::runtime_error(err);  // libpcap names the file itself
    }
    const int link = pcap_datalink(handle_);
    if (link != DLT_EN10MB) {
        const char* name = pcap_datalink_val_to_name(link);
        pcap_close(handle_);
        handle_ = nullptr;
        throw std::runtime_error(path + ": link type " + (name ? name : std::to_string(link)) +
                                 " is not Ethernet (RoCEv2 frames are Ethernet frames)");
    }
}

PcapReader::~PcapReader() {
    if (handle_ != nullptr) {
        pcap_close(handle_);
    }
}

std::optional<CapturedFrame> PcapReader::next() {
    pcap_pkthdr* hdr = nullptr;
    const u_char* data = nullptr;
    const int rc = pcap_next_ex(handle_, &hdr, &data);
    if (rc == 1) {
        return CapturedFrame{std::span<const std::uint8_t>(data, hdr->caplen), hdr->len};
    }
    if (rc == PCAP_ERROR_BREAK) {
        return std::nullopt;  // end of file
    }
    throw std::runtime_error(path_ + ": " + pcap_geterr(handle_));
}

}  // namespace uroce::tools
