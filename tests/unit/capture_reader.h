// Loads the rdma_rxe captures the wire tests run against.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace uroce::test {

using Frame = std::vector<std::uint8_t>;

// Every frame of the Ethernet pcap at `path`, in file order. Throws
// std::runtime_error when the file cannot be read, its link type is not
// Ethernet or a frame was cut short by the snap length.
[[nodiscard]] std::vector<Frame> load_capture(const std::filesystem::path& path);

// $UROCE_TEST_DATA; throws std::runtime_error when it is unset.
[[nodiscard]] std::filesystem::path test_data_dir();

struct Capture {
    std::string name;  // file name, e.g. "ud_pingpong.pcap"
    std::vector<Frame> frames;
};

// All of $UROCE_TEST_DATA/rxe/*.pcap, sorted by name, loaded once.
[[nodiscard]] const std::vector<Capture>& rxe_captures();

// One capture by file name; throws std::runtime_error when it is not there.
[[nodiscard]] const Capture& rxe_capture(const std::string& name);

}  // namespace uroce::test
