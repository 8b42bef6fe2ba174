// IBA time values: 4.096 us * 2^n (IBA 12.6.5 "CM response timeout",
// 9.7.6.1.3 "local ACK timeout"), and the CM timer rules Linux applies
// (cm.c), expressed in milliseconds.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>

namespace uroce::cm {

using Millis = std::chrono::milliseconds;

// 4.096 us * 2^n rounded as Linux does: 2^(n-8) ms, at least 1 ms.
[[nodiscard]] constexpr Millis iba_time_to_ms(std::uint8_t n) {
    return Millis(std::int64_t{1} << std::max(0, static_cast<int>(n) - 8));
}

// The local ACK timeout a REQ carries: the packet lifetime plus one (a round
// trip), raised to cover the CA's ACK delay, as IBA 12.7.34 asks. With
// packet lifetime 18 and ACK delay 15 (rdma_rxe) it is 19.
[[nodiscard]] constexpr std::uint8_t local_ack_timeout(std::uint8_t ca_ack_delay, std::uint8_t packet_life_time) {
    int t = packet_life_time + 1;
    if (t >= ca_ack_delay) {
        t += ca_ack_delay >= t - 1 ? 1 : 0;
    } else {
        t = ca_ack_delay + (t >= ca_ack_delay - 1 ? 1 : 0);
    }
    return static_cast<std::uint8_t>(std::min(31, t));
}

// How long an active side waits for REP before resending REQ: two packet
// lifetimes plus the peer's CM response time (18, 20: 2*1024 + 4096 ms).
[[nodiscard]] constexpr Millis req_timeout(std::uint8_t packet_life_time, std::uint8_t remote_cm_response_timeout) {
    return 2 * iba_time_to_ms(packet_life_time) + iba_time_to_ms(remote_cm_response_timeout);
}

// After an MRA the sender waits the announced service time plus a packet
// lifetime before it resends.
[[nodiscard]] constexpr Millis mra_timeout(std::uint8_t service_timeout, std::uint8_t packet_life_time) {
    return iba_time_to_ms(service_timeout) + iba_time_to_ms(packet_life_time);
}

// Timewait lasts one path timeout (the packet lifetime plus one): 2048 ms
// for lifetime 18.
[[nodiscard]] constexpr Millis timewait_duration(std::uint8_t packet_life_time) {
    return iba_time_to_ms(static_cast<std::uint8_t>(packet_life_time + 1));
}

static_assert(iba_time_to_ms(20) == Millis(4096));
static_assert(req_timeout(18, 20) == Millis(6144));
static_assert(timewait_duration(18) == Millis(2048));
static_assert(local_ack_timeout(15, 18) == 19);

}  // namespace uroce::cm
