#include "capture_reader.h"

#include <pcap/pcap.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <stdexcept>

namespace uroce::test {

std::vector<Frame> load_capture(const std::filesystem::path& path) {
    char err[PCAP_ERRBUF_SIZE] = {};
    std::unique_ptr<pcap_t, decltype(&pcap_close)> handle(pcap_open_offline(path.c_str(), err), &pcap_close);
    if (!handle) {
        throw std::runtime_error(path.string() + ": " + err);
    }
    if (pcap_datalink(handle.get()) != DLT_EN10MB) {
        throw std::runtime_error(path.string() + ": link type is not Ethernet");
    }
    std::vector<Frame> frames;
    pcap_pkthdr* hdr = nullptr;
    const u_char* data = nullptr;
    int rc = 0;
    while ((rc = pcap_next_ex(handle.get(), &hdr, &data)) == 1) {
        if (hdr->caplen != hdr->len) {
            throw std::runtime_error(path.string() + ": frame " + std::to_string(frames.size() + 1) + " is truncated");
        }
        frames.emplace_back(data, data + hdr->caplen);
    }
    if (rc != PCAP_ERROR_BREAK) {
        throw std::runtime_error(path.string() + ": " + pcap_geterr(handle.get()));
    }
    return frames;
}

std::filesystem::path test_data_dir() {
    const char* dir = std::getenv("UROCE_TEST_DATA");
    if (dir == nullptr || *dir == '\0') {
        throw std::runtime_error("UROCE_TEST_DATA is not set");
    }
    return dir;
}

const std::vector<Capture>& rxe_captures() {
    static const std::vector<Capture> captures = [] {
        std::vector<Capture> out;
        for (const auto& entry : std::filesystem::directory_iterator(test_data_dir() / "rxe")) {
            if (entry.is_regular_file() && entry.path().extension() == ".pcap") {
                out.push_back({entry.path().filename().string(), load_capture(entry.path())});
            }
        }
        std::sort(out.begin(), out.end(), [](const Capture& a, const Capture& b) { return a.name < b.name; });
        return out;
    }();
    return captures;
}

const Capture& rxe_capture(const std::string& name) {
    for (const auto& c : rxe_captures()) {
        if (c.name == name) {
            return c;
        }
    }
    throw std::runtime_error("capture " + name + " not found under " + (test_data_dir() / "rxe").string());
}

}  // namespace uroce::test
