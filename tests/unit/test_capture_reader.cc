#include <gtest/gtest.h>

#include <filesystem>
#include <stdexcept>
#include <string>

#include "capture_reader.h"

namespace uroce::test {
namespace {

TEST(CaptureReader, BundledCapturesLoadWithTheirFrameCounts) {
    const struct {
        const char* name;
        std::size_t frames;
    } expected[] = {
        {"atomic_cs.pcap", 10},  {"rc_pingpong.pcap", 50}, {"read_bw.pcap", 325},
        {"ud_pingpong.pcap", 10}, {"write_bw.pcap", 325},   {"write_lat_small.pcap", 20},
    };
    for (const auto& e : expected) {
        EXPECT_EQ(rxe_capture(e.name).frames.size(), e.frames) << e.name;
    }
    EXPECT_GE(rxe_captures().size(), std::size(expected));
}

TEST(CaptureReader, FramesAreWhole) {
    const auto& ud = rxe_capture("ud_pingpong.pcap");
    ASSERT_FALSE(ud.frames.empty());
    EXPECT_EQ(ud.frames.front().size(), 578u);
    EXPECT_EQ(ud.frames.front()[12], 0x08);
    EXPECT_EQ(ud.frames.front()[13], 0x00);
}

TEST(CaptureReader, MissingFileThrows) {
    EXPECT_THROW(static_cast<void>(load_capture(test_data_dir() / "rxe" / "no_such_file.pcap")), std::runtime_error);
    EXPECT_THROW(static_cast<void>(rxe_capture("no_such_file.pcap")), std::runtime_error);
}

}  // namespace
}  // namespace uroce::test
