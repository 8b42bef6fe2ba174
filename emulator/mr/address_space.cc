#include "address_space.h"

#include <fstream>
#include <sstream>

namespace uroce::mr {

std::vector<Mapping> parse_smaps(const std::string& text) {
    std::vector<Mapping> maps;
    std::istringstream in(text);
    std::string line;
    while (std::getline(in, line)) {
        // Mapping lines: "start-end perms offset dev inode [path]"; attribute
        // lines: "Name:   value kB".
        const auto dash = line.find('-');
        const auto space = line.find(' ');
        if (dash != std::string::npos && space != std::string::npos && dash < space &&
            line.find(':') > space) {
            Mapping m;
            try {
                m.start = std::stoull(line.substr(0, dash), nullptr, 16);
                m.end = std::stoull(line.substr(dash + 1, space - dash - 1), nullptr, 16);
            } catch (const std::exception&) {
                continue;
            }
            if (space + 2 < line.size()) {
                m.readable = line[space + 1] == 'r';
                m.writable = line[space + 2] == 'w';
            }
            std::istringstream fields(line.substr(space + 1));
            std::string perms, offset, dev, inode;
            fields >> perms >> offset >> dev >> inode;
            std::getline(fields >> std::ws, m.path);
            maps.push_back(m);
        } else if (!maps.empty() && line.rfind("KernelPageSize:", 0) == 0) {
            std::istringstream v(line.substr(15));
            std::uint64_t kb = 0;
            if (v >> kb) {
                maps.back().kernel_page_size = kb * 1024;
            }
        }
    }
    return maps;
}

std::vector<Mapping> ProcessAddressSpace::mappings() const {
    std::ifstream f("/proc/" + std::to_string(pid_) + "/smaps");
    std::stringstream ss;
    ss << f.rdbuf();
    return parse_smaps(ss.str());
}

bool ProcessAddressSpace::accessible(std::uint64_t addr, std::uint64_t len, bool write) const {
    return covered_by(mappings(), addr, len,
                      [write](const Mapping& m) { return m.readable && (!write || m.writable); });
}

std::optional<std::uint64_t> ProcessAddressSpace::huge_page_size(std::uint64_t addr, std::uint64_t len) const {
    std::uint64_t size = 0;
    const bool huge = covered_by(mappings(), addr, len, [&size](const Mapping& m) {
        if (m.kernel_page_size <= 4096 || (size != 0 && m.kernel_page_size != size)) {
            return false;
        }
        size = m.kernel_page_size;
        return true;
    });
    if (!huge || size == 0) {
        return std::nullopt;
    }
    return size;
}

}  // namespace uroce::mr
