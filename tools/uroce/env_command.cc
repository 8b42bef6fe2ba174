#include "env_command.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "device_locator.h"

namespace uroce::tools {

namespace {

struct Exports {
    std::vector<std::pair<std::string, std::string>> vars;
    std::string problem;  // why the environment will not work, if it will not
};

Exports exports_for(const std::string& state_dir, bool with_preload) {
    Exports e;
    e.vars.emplace_back("SYSFS_PATH", state_dir + "/sys");
    e.vars.emplace_back("UROCE_STATE_DIR", state_dir);
    const std::string driver = provider_driver_path();
    if (driver.empty()) {
        e.problem = "the provider liburoce-rdmav34.so is not built or installed";
    } else {
        e.vars.emplace_back("RDMAV_DRIVERS", driver);
    }
    if (with_preload) {
        const std::string preload = preload_library_path();
        if (!preload.empty()) {
            const char* old = std::getenv("LD_PRELOAD");
            e.vars.emplace_back("LD_PRELOAD", old != nullptr && *old != '\0' ? preload + ":" + old : preload);
        }
    }
    return e;
}

std::string shell_quote(const std::string& s) {
    std::string q = "'";
    for (char c : s) {
        q += c == '\'' ? std::string("'\\''") : std::string(1, c);
    }
    return q + "'";
}

}  // namespace

void add_env_commands(CLI::App& app) {
    auto state_dir = std::make_shared<std::string>(default_state_dir());

    auto* env = app.add_subcommand("env", "Print the shell exports that make verbs programs see the uroce device");
    env->add_option("--state-dir", *state_dir, "where uroced publishes the device")->capture_default_str();
    env->callback([state_dir] {
        const Exports e = exports_for(*state_dir, false);
        for (const auto& [k, v] : e.vars) {
            fmt::print("export {}={}\n", k, shell_quote(v));
        }
        if (!e.problem.empty()) {
            fmt::print(stderr, "uroce env: {}\n", e.problem);
            throw CLI::RuntimeError(1);
        }
    });

    auto* exec = app.add_subcommand("exec", "Run a program with the uroce environment (and completion channels)");
    auto argv = std::make_shared<std::vector<std::string>>();
    auto sanitize = std::make_shared<bool>(false);
    exec->add_option("--state-dir", *state_dir, "where uroced publishes the device")->capture_default_str();
    exec->add_flag("--sanitize", *sanitize,
                   "report RDMA buffer misuse the program commits (docs/sanitizer.md; UROCE_SANITIZE=1)");
    exec->add_option("command", *argv, "PROGRAM [ARGS...] (after --)")->required();
    exec->prefix_command();
    exec->callback([state_dir, argv, sanitize] {
        const Exports e = exports_for(*state_dir, true);
        if (!e.problem.empty()) {
            fmt::print(stderr, "uroce exec: {}\n", e.problem);
            throw CLI::RuntimeError(1);
        }
        for (const auto& [k, v] : e.vars) {
            ::setenv(k.c_str(), v.c_str(), 1);
        }
        if (*sanitize && std::getenv("UROCE_SANITIZE") == nullptr) {
            ::setenv("UROCE_SANITIZE", "1", 1);  // UROCE_SANITIZE=abort set by the caller stays
        }
        std::vector<char*> args;
        for (auto& a : *argv) {
            args.push_back(a.data());
        }
        args.push_back(nullptr);
        ::execvp(args[0], args.data());
        fmt::print(stderr, "uroce exec: cannot run {}: {}\n", (*argv)[0], std::strerror(errno));
        throw CLI::RuntimeError(127);
    });
}

}  // namespace uroce::tools
