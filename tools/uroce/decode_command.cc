#include "decode_command.h"

#include <fmt/format.h>

#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>

#include "frame_report.h"
#include "pcap_reader.h"

namespace uroce::tools {

namespace {

// Exit codes: 0 every RoCE frame's ICRC verifies; 1 some RoCE frame is bad
// (ICRC or structure); 2 the file could not be read.
constexpr int kExitAllGood = 0;
constexpr int kExitBadFrames = 1;
constexpr int kExitUnreadable = 2;

struct Totals {
    std::size_t frames = 0;
    std::size_t roce = 0;
    std::size_t icrc_ok = 0;
    std::size_t icrc_bad = 0;
    std::size_t dropped = 0;
};

int run_decode(const std::string& path, bool json) {
    Totals t;
    try {
        PcapReader reader(path);
        while (auto frame = reader.next()) {
            ++t.frames;
            const FrameReport r = analyse_frame(t.frames, frame->bytes);
            if (r.cls != FrameClass::Skipped) {
                ++t.roce;
            }
            if (r.cls == FrameClass::Dropped) {
                ++t.dropped;
            } else if (r.cls == FrameClass::Roce) {
                ++(r.icrc_ok ? t.icrc_ok : t.icrc_bad);
            }
            if (json) {
                auto j = report_json(r);
                if (frame->original_length != frame->bytes.size()) {
                    j["captured_length"] = frame->bytes.size();
                    j["original_length"] = frame->original_length;
                }
                std::puts(j.dump().c_str());
            } else {
                std::string line = report_text(r);
                if (frame->original_length != frame->bytes.size()) {
                    line += fmt::format(" [capture cut at {} of {} bytes]", frame->bytes.size(), frame->original_length);
                }
                std::puts(line.c_str());
            }
        }
    } catch (const std::runtime_error& e) {
        std::fflush(stdout);
        fmt::print(stderr, "uroce decode: {}\n", e.what());
        return kExitUnreadable;
    }
    if (json) {
        nlohmann::ordered_json j;
        j["frames"] = t.frames;
        j["roce"] = t.roce;
        j["icrc_ok"] = t.icrc_ok;
        j["icrc_bad"] = t.icrc_bad;
        j["malformed"] = t.dropped;
        std::puts(j.dump().c_str());
    } else {
        fmt::print("{} frames, {} roce, {} icrc ok, {} icrc bad\n", t.frames, t.roce, t.icrc_ok, t.icrc_bad);
    }
    std::fflush(stdout);
    return t.icrc_ok == t.roce ? kExitAllGood : kExitBadFrames;
}

}  // namespace

void add_decode_command(CLI::App& app) {
    auto* cmd = app.add_subcommand("decode", "Decode the RoCEv2 frames of a pcap/pcapng capture and verify their ICRC");
    auto path = std::make_shared<std::string>();
    auto json = std::make_shared<bool>(false);
    cmd->add_option("FILE", *path, "capture file (Ethernet link type)")->required();
    cmd->add_flag("--json", *json, "one JSON object per frame, then one with the totals");
    cmd->footer(
        "Prints one line per frame, then 'N frames, R roce, K icrc ok, B icrc bad'.\n"
        "Exit status: 0 when every RoCE frame's ICRC verifies, 1 otherwise, 2 when the file cannot be read.");
    cmd->callback([path, json]() { throw CLI::RuntimeError(run_decode(*path, *json)); });
}

}  // namespace uroce::tools
