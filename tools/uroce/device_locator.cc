#include "device_locator.h"

#include <cstdlib>
#include <filesystem>

namespace uroce::tools {

namespace fs = std::filesystem;

std::string default_state_dir() {
    const char* env = std::getenv("UROCE_STATE_DIR");
    return env != nullptr && *env != '\0' ? env : "/run/uroce";
}

namespace {

// `name` in the build tree (verbs_provider/ beside tools/), else installed.
std::string find_library(const std::string& name) {
    std::error_code ec;
    const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
    if (!ec) {
        const fs::path built = exe.parent_path().parent_path().parent_path() / "verbs_provider" / name;
        if (fs::exists(built, ec)) {
            return built.string();
        }
    }
    const fs::path installed = fs::path(UROCE_INSTALL_LIBDIR) / name;
    if (fs::exists(installed, ec)) {
        return installed.string();
    }
    return {};
}

}  // namespace

std::string provider_driver_path() {
    std::string p = find_library("liburoce-rdmav34.so");
    const std::string suffix = "-rdmav34.so";
    if (p.size() > suffix.size()) {
        p.resize(p.size() - suffix.size());
    }
    return p;
}

std::string preload_library_path() { return find_library("liburoce-preload.so"); }

}  // namespace uroce::tools
