// The IBA PathRecord (IBA 15.2.5.16, 64 bytes, big-endian) as rdma_cm
// passes it to and from programs: `struct ib_path_rec_data` (flags, then the
// packed record) in SET_OPTION(RDMA_OPTION_IB_PATH) and QUERY(PATH)
// (rdma/ib_user_sa.h, ucma.c ucma_set_ib_path / ucma_query_path).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

#include <rdma/ib_user_sa.h>

#include "ucma/connection_manager.h"

namespace uroce::ucma {

constexpr std::size_t kPathRecordBytes = 64;
constexpr std::size_t kPathDataBytes = sizeof(ib_path_rec_data);  // flags, reserved, the record
static_assert(kPathDataBytes == 8 + kPathRecordBytes);

// The one record rdma_cm takes: a GMP, primary, bidirectional path.
constexpr std::uint32_t kPrimaryPathFlags = IB_PATH_GMP | IB_PATH_PRIMARY | IB_PATH_BIDIRECTIONAL;
static_assert(kPrimaryPathFlags == 0x2B);

using PackedPathRecord = std::array<std::uint8_t, kPathRecordBytes>;

// The fields of a RoCE path rdma_cm keeps (cma.c cma_resolve_iboe_route):
// GIDs, flow label, hop limit, traffic class, SL, MTU and packet lifetime,
// with P_Key 0xFFFF, reversible, "exactly" selectors and rate 0 (port
// current). LIDs and the service ID are 0.
[[nodiscard]] PackedPathRecord pack_path_record(const PathInfo& path);
[[nodiscard]] PathInfo unpack_path_record(std::span<const std::uint8_t, kPathRecordBytes> record);

// The record SET_OPTION(IB_PATH) takes from `records` (whole
// ib_path_rec_data entries): the first whose flags are exactly
// kPrimaryPathFlags (ucma_set_ib_path); nothing when none is, or when the
// length is not a multiple of 72 or zero (EINVAL there).
[[nodiscard]] std::optional<PathInfo> primary_path_of(std::span<const std::uint8_t> records);

}  // namespace uroce::ucma
