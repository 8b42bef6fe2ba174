// The daemon's ring of explained-failure records: sequence numbers, the
// oldest overwritten, what a reader that fell behind is told, filtering,
// and flushed completions sharing one record.
#include <gtest/gtest.h>

#include "engine/failure_event.h"
#include "event_log.h"

namespace uroce::daemon {
namespace {

uroce_explain_record refusal(std::uint32_t qpn) {
    uroce_explain_record r{};
    r.kind = static_cast<std::uint32_t>(engine::FailureKind::RequestRefused);
    r.check = static_cast<std::uint32_t>(engine::FailureCheck::KeyNotFound);
    r.qpn = qpn;
    r.count = 1;
    return r;
}

uroce_explain_record flush(std::uint32_t qpn, std::uint64_t wr_id) {
    uroce_explain_record r{};
    r.kind = static_cast<std::uint32_t>(engine::FailureKind::ErrorCompletion);
    r.check = static_cast<std::uint32_t>(engine::FailureCheck::Flushed);
    r.qpn = qpn;
    r.wr_id = wr_id;
    r.count = 1;
    return r;
}

const auto kAll = [](const uroce_explain_record&) { return true; };

TEST(EventLog, NumbersRecordsFromOneAndReadsThemInOrder) {
    EventLog log(8);
    for (std::uint32_t q = 10; q < 13; ++q) {
        log.add(refusal(q));
    }
    const EventLog::Page page = log.fetch(0, 10, kAll);
    ASSERT_EQ(page.records.size(), 3u);
    EXPECT_EQ(page.records[0].seq, 1u);
    EXPECT_EQ(page.records[2].seq, 3u);
    EXPECT_EQ(page.records[2].qpn, 12u);
    EXPECT_EQ(page.last, 3u);
    EXPECT_EQ(page.missed, 0u);
    EXPECT_NE(page.records[0].time_ns, 0u);
}

TEST(EventLog, ReadsOnlyWhatCameAfterAndInPages) {
    EventLog log(8);
    for (std::uint32_t q = 0; q < 5; ++q) {
        log.add(refusal(q));
    }
    EventLog::Page page = log.fetch(2, 2, kAll);
    ASSERT_EQ(page.records.size(), 2u);
    EXPECT_EQ(page.records[0].seq, 3u);
    EXPECT_EQ(page.last, 4u);
    page = log.fetch(page.last, 2, kAll);
    ASSERT_EQ(page.records.size(), 1u);
    EXPECT_EQ(page.records[0].seq, 5u);
    page = log.fetch(page.last, 2, kAll);
    EXPECT_TRUE(page.records.empty());
    EXPECT_EQ(page.last, 5u);
}

TEST(EventLog, OverwritesTheOldestAndCountsWhatAReaderMissed) {
    EventLog log(4);
    for (std::uint32_t q = 0; q < 10; ++q) {
        log.add(refusal(q));
    }
    EXPECT_EQ(log.oldest(), 7u);
    EXPECT_EQ(log.newest(), 10u);
    // A reader that had seen record 3 missed 4, 5 and 6.
    const EventLog::Page page = log.fetch(3, 10, kAll);
    EXPECT_EQ(page.missed, 3u);
    ASSERT_EQ(page.records.size(), 4u);
    EXPECT_EQ(page.records[0].seq, 7u);
    EXPECT_EQ(page.records[0].qpn, 6u);
    EXPECT_EQ(page.records[3].seq, 10u);
    // One that is up to date missed nothing.
    EXPECT_EQ(log.fetch(8, 10, kAll).missed, 0u);
}

TEST(EventLog, AReaderAheadOfTheLogStartsAgainFromTheOldest) {
    EventLog log(4);
    log.add(refusal(1));
    const EventLog::Page page = log.fetch(100, 10, kAll);
    ASSERT_EQ(page.records.size(), 1u);
    EXPECT_EQ(page.records[0].seq, 1u);
}

TEST(EventLog, SkipsWhatTheReaderMayNotSeeWithoutReturningItAgain) {
    EventLog log(8);
    log.set_uid_of([](std::uint32_t client) { return client == 1 ? 1000u : 0u; });
    uroce_explain_record theirs = refusal(5);
    theirs.client = 2;
    uroce_explain_record mine = refusal(6);
    mine.client = 1;
    log.add(theirs);
    log.add(theirs);
    log.add(mine);
    const auto only_mine = [](const uroce_explain_record& r) { return r.uid == 1000u; };
    EventLog::Page page = log.fetch(0, 1, only_mine);
    ASSERT_EQ(page.records.size(), 1u);
    EXPECT_EQ(page.records[0].qpn, 6u);
    EXPECT_EQ(page.records[0].uid, 1000u);
    EXPECT_EQ(page.last, 3u);
    page = log.fetch(page.last, 1, only_mine);
    EXPECT_TRUE(page.records.empty());
}

TEST(EventLog, UnknownOwnersAreMarked) {
    EventLog log(2);
    log.add(refusal(1));
    EXPECT_EQ(log.fetch(0, 1, kAll).records.at(0).uid, UROCE_EXPLAIN_UID_UNKNOWN);
}

TEST(EventLog, ConsecutiveFlushesOfOneQueueShareARecord) {
    EventLog log(8);
    log.add(refusal(7));
    for (std::uint64_t w = 1; w <= 5; ++w) {
        log.add(flush(7, w));
    }
    log.add(flush(8, 9));  // another QP: a record of its own
    const EventLog::Page page = log.fetch(0, 10, kAll);
    ASSERT_EQ(page.records.size(), 3u);
    EXPECT_EQ(page.records[1].count, 5u);
    EXPECT_EQ(page.records[1].wr_id, 5u);
    EXPECT_EQ(page.records[2].count, 1u);
    EXPECT_EQ(log.newest(), 3u);
}

}  // namespace
}  // namespace uroce::daemon
