// One fault-injection rule: what to do to a frame (the action), to which
// frames (direction and filters) and when (the trigger). Rules are made by
// parse_rule (rule_parse.h) from the text syntax of docs/fault-injection.md
// and applied by the Injector (injector.h); this file is only the data.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string_view>

#include "wire/headers.h"
#include "wire/opcode.h"

namespace uroce::fault {

// The way a frame travels through the port.
enum class Direction : std::uint8_t { Rx, Tx };

// The ways a rule looks at.
enum class Directions : std::uint8_t { Rx, Tx, Both };

enum class Action : std::uint8_t {
    Drop,        // the frame is lost
    Duplicate,   // the frame goes through twice
    Reorder,     // the frame is held until `depth` later frames have passed
    Delay,       // the frame is held for `delay` (+- `jitter`)
    Corrupt,     // one byte under the ICRC changes: the receiver's ICRC check fails
    Truncate,    // the frame is cut short (`keep_bytes`, or half its length)
    LinkDown,    // every frame, both ways, is lost for `window` (or until removed)
    PeerSilent,  // every frame to or from `peer` is lost for `window` (or until removed)
    Count,
};
constexpr std::size_t kActionCount = static_cast<std::size_t>(Action::Count);
constexpr std::array<std::string_view, kActionCount> kActionName = {
    "drop", "duplicate", "reorder", "delay", "corrupt", "truncate", "down", "silent",
};

// What a frame is, as far as rules can tell (classify.h). Cm: a MAD to QP1
// (the connection manager); the other classes are of RoCE frames to other QPs.
enum class FrameClass : std::uint8_t {
    Any,       // every frame (including ARP and ND for down and silent)
    Request,   // SEND, WRITE, READ request, atomics (IBA 9.2 table 38 "request")
    Response,  // READ response and ATOMIC ACKNOWLEDGE packets
    Ack,       // ACKNOWLEDGE with an ACK syndrome (IBA 9.7.5.2.1 table 43)
    Nak,       // ACKNOWLEDGE with a NAK or RNR NAK syndrome
    Cm,        // a MAD to QP1
    Count,
};
constexpr std::size_t kFrameClassCount = static_cast<std::size_t>(FrameClass::Count);
constexpr std::array<std::string_view, kFrameClassCount> kFrameClassName = {
    "any", "request", "response", "ack", "nak", "cm",
};

// When a rule acts on a frame its filters admit.
enum class TriggerKind : std::uint8_t {
    Rate,  // each admitted frame with probability ppm / 1e6
    Nth,   // the nth admitted frame (counting from 1) and the count - 1 after it
    Window,  // down and silent: every admitted frame while the window is open
};

struct Trigger {
    TriggerKind kind = TriggerKind::Rate;
    std::uint32_t ppm = 0;       // Rate: parts per million
    std::uint64_t nth = 0;       // Nth
    // How many times the rule acts at most (0: no limit; Nth: default 1).
    std::uint64_t count = 0;
};

struct Filter {
    Directions directions = Directions::Both;
    FrameClass frame_class = FrameClass::Any;
    std::optional<std::uint32_t> dest_qp;      // BTH destination QP
    std::optional<std::uint32_t> src_qp;       // DETH source QP (UD and QP1 frames carry one)
    std::optional<wire::Operation> operation;  // from the opcode table (wire/opcode.h)
    std::optional<wire::Gid> peer;             // rx: the source address, tx: the destination
};

struct Rule {
    Action action = Action::Drop;
    Trigger trigger;
    Filter filter;
    std::uint32_t depth = 0;                   // Reorder: later frames to let pass first
    std::chrono::nanoseconds delay{0};         // Delay; Reorder: the longest hold
    std::chrono::nanoseconds jitter{0};        // Delay: uniform in [-jitter, +jitter]
    std::optional<std::chrono::nanoseconds> window;  // LinkDown, PeerSilent: how long (none: until removed)
    std::uint32_t keep_bytes = 0;              // Truncate: bytes kept (0: half the frame)
};

// A reordered frame is released after this long even if fewer than `depth`
// frames followed it (a quiet link must not keep it forever).
constexpr std::chrono::nanoseconds kDefaultReorderHold = std::chrono::milliseconds(1);

}  // namespace uroce::fault
