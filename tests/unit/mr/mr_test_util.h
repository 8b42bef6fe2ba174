// Shared helpers of the memory-registration unit tests: a table with one
// owner and one PD, request builders, and checks that end their own guard.
#pragma once

#include <gtest/gtest.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <ostream>
#include <vector>

#include "common/epoch.h"
#include "mr/access_flags.h"
#include "mr/check_status.h"
#include "mr/keys.h"
#include "mr/mr_table.h"
#include "mr/pd_table.h"
#include "mr/relaxed_pool.h"

namespace uroce::mr {

// gtest prints a CheckStatus by name.
inline void PrintTo(CheckStatus s, std::ostream* os) {
    if (static_cast<std::size_t>(s) < kCheckStatusCount) {
        *os << info(s).name;
    } else {
        *os << "CheckStatus(" << static_cast<int>(s) << ")";
    }
}

namespace test {

constexpr std::uint32_t kLW = Access::kLocalWrite;
constexpr std::uint32_t kRW = Access::kRemoteWrite;
constexpr std::uint32_t kRR = Access::kRemoteRead;
constexpr std::uint32_t kRA = Access::kRemoteAtomic;
constexpr std::uint32_t kAllRemote = kRR | kRW | kRA;
constexpr std::uint32_t kFull = kLW | kAllRemote;
// qp_access_flags of a QP that allows every remote operation.
constexpr std::uint32_t kQpAll = kAllRemote;

constexpr std::uint32_t kOwner = 1;
constexpr std::uint32_t kOtherOwner = 2;
constexpr std::uint32_t kQpn = 0x11;

inline std::uint64_t addr_of(const void* p) { return reinterpret_cast<std::uintptr_t>(p); }

inline RegRequest make_req(std::uint32_t pd, std::uint64_t addr, std::uint64_t length, std::uint32_t access,
                           std::uint32_t owner = kOwner) {
    RegRequest r;
    r.pd = pd;
    r.owner = owner;
    r.addr = addr;
    r.length = length;
    r.access = access;
    return r;
}

// The outcome of a check, copied out so it outlives the guard.
struct Checked {
    CheckStatus status = CheckStatus::Ok;
    std::uint64_t host_addr = 0;
    bool has_desc = false;
    std::uint32_t desc_key = 0;

    [[nodiscard]] bool ok() const { return status == CheckStatus::Ok; }
};

inline Checked copy_out(const Translation& t) {
    Checked c;
    c.status = t.status;
    c.host_addr = t.host_addr;
    c.has_desc = t.desc != nullptr;
    c.desc_key = t.desc != nullptr ? t.desc->key() : 0;
    return c;
}

inline Checked remote(const MrTable& table, std::uint32_t rkey, std::uint32_t pd, RemoteOp op, std::uint64_t va,
                      std::uint64_t length, std::uint32_t qpn = kQpn, std::uint32_t qp_access = kQpAll) {
    EpochGuard guard(table.epoch());
    RemoteRequest r;
    r.rkey = MrKey{rkey};
    r.pd = PdHandle{pd};
    r.qpn = Qpn{qpn};
    r.qp_access = qp_access;
    r.op = op;
    r.va = va;
    r.length = length;
    return copy_out(table.check_remote(guard, r));
}

inline Checked local(const MrTable& table, std::uint32_t lkey, std::uint32_t pd, std::uint64_t addr,
                     std::uint64_t length, bool device_writes, std::uint32_t qpn = kQpn) {
    EpochGuard guard(table.epoch());
    return copy_out(table.check_local(guard, MrKey{lkey}, PdHandle{pd}, addr, length, device_writes, Qpn{qpn}));
}

// A key with the same index and another key byte.
inline std::uint32_t other_byte(std::uint32_t key, std::uint8_t delta = 1) {
    return make_key(key_index(key), static_cast<std::uint8_t>(key_byte(key) + delta));
}

// Shared memory for a relaxed pool, 64-byte aligned as the header wants.
struct PoolMemory {
    explicit PoolMemory(std::uint32_t capacity)
        : words((relaxed_pool_bytes(capacity) + 63) / 8 + 8) {
        const std::uint64_t raw = addr_of(words.data());
        header = reinterpret_cast<uroce_relaxed_pool_header*>((raw + 63) & ~std::uint64_t{63});
    }
    [[nodiscard]] uroce_relaxed_slot* slots() const { return relaxed_slots(header); }

    std::vector<std::uint64_t> words;
    uroce_relaxed_pool_header* header = nullptr;
};

// One owner with one PD and a page-aligned buffer to register.
class MrTest : public ::testing::Test {
protected:
    static constexpr std::size_t kBufBytes = 16 * 4096;

    MrTest() : table(pds), buf_storage(kBufBytes + 4096) {
        pd = pds.alloc(kOwner).pd;
        const std::uint64_t raw = addr_of(buf_storage.data());
        buf = (raw + 4095) & ~std::uint64_t{4095};
    }

    Registered reg(std::uint64_t addr, std::uint64_t length, std::uint32_t access) {
        return table.reg_mr(make_req(pd, addr, length, access));
    }
    // Registers [buf + offset, +length) and fails the test if that fails.
    std::uint32_t reg_ok(std::uint64_t offset, std::uint64_t length, std::uint32_t access) {
        const Registered r = reg(buf + offset, length, access);
        EXPECT_EQ(r.error, 0);
        EXPECT_EQ(r.lkey, r.rkey);
        return r.lkey;
    }
    Checked rd(std::uint32_t rkey, std::uint64_t va, std::uint64_t length) {
        return remote(table, rkey, pd, RemoteOp::Read, va, length);
    }
    Checked wr(std::uint32_t rkey, std::uint64_t va, std::uint64_t length) {
        return remote(table, rkey, pd, RemoteOp::Write, va, length);
    }
    Checked atomic(std::uint32_t rkey, std::uint64_t va, std::uint64_t length = 8) {
        return remote(table, rkey, pd, RemoteOp::Atomic, va, length);
    }

    PdTable pds;
    MrTable table;
    std::uint32_t pd = 0;
    std::vector<std::byte> buf_storage;
    std::uint64_t buf = 0;  // page aligned, kBufBytes long
};

}  // namespace test
}  // namespace uroce::mr
