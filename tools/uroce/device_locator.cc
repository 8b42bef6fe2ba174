#include "device_locator.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string_view>

namespace uroce::tools {

namespace fs = std::filesystem;

std::string default_state_dir() {
    const char* env = std::getenv("UROCE_STATE_DIR");
    return env != nullptr && *env != '\0' ? env : "/run/uroce";
}

namespace {

// The build directory when this uroce runs from one (BUILD/tools/uroce/uroce).
std::optional<fs::path> build_root() {
    std::error_code ec;
    const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
    if (ec) {
        return std::nullopt;
    }
    const fs::path root = exe.parent_path().parent_path().parent_path();
    if (!fs::exists(root / "meson-info", ec)) {
        return std::nullopt;
    }
    return root;
}

// `name` in the build tree (verbs_provider/ beside tools/), else in
// `installed_dir`.
std::string find_library(const std::string& name, const char* installed_dir) {
    std::error_code ec;
    if (const auto root = build_root()) {
        const fs::path built = *root / "verbs_provider" / name;
        if (fs::exists(built, ec)) {
            return built.string();
        }
    }
    const fs::path installed = fs::path(installed_dir) / name;
    if (fs::exists(installed, ec)) {
        return installed.string();
    }
    return {};
}

std::string find_in_path(const std::string& program) {
    const char* path = std::getenv("PATH");
    std::string_view rest = path != nullptr ? path : "";
    while (!rest.empty()) {
        const auto colon = rest.find(':');
        const fs::path candidate = fs::path(rest.substr(0, colon)) / program;
        if (::access(candidate.c_str(), X_OK) == 0) {
            return candidate.string();
        }
        rest = colon == std::string_view::npos ? std::string_view{} : rest.substr(colon + 1);
    }
    return {};
}

}  // namespace

std::string provider_driver_path() {
    std::string p = find_library("liburoce-rdmav34.so", UROCE_INSTALL_PROVIDERDIR);
    const std::string suffix = "-rdmav34.so";
    if (p.size() > suffix.size()) {
        p.resize(p.size() - suffix.size());
    }
    return p;
}

std::string preload_library_path() { return find_library("liburoce-preload.so", UROCE_INSTALL_LIBDIR); }

std::string daemon_path() {
    std::error_code ec;
    if (const auto root = build_root()) {
        const fs::path built = *root / "tools" / "uroced" / "uroced";
        if (fs::exists(built, ec)) {
            return built.string();
        }
    }
    const fs::path installed = fs::path(UROCE_INSTALL_BINDIR) / "uroced";
    if (::access(installed.c_str(), X_OK) == 0) {
        return installed.string();
    }
    return find_in_path("uroced");
}

}  // namespace uroce::tools
