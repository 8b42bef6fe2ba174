// The identifiers of one device, each a type of its own (strong_id.h), so a
// QPN cannot be passed where a memory key or a CQ handle is expected. Used
// at the engine (engine/engine.h), key table (mr/mr_table.h) and queue
// object (device/queue_objects.h) interfaces; docs/architecture.md.
#pragma once

#include <cstdint>

#include "common/strong_id.h"

namespace uroce {

struct QpnTag {};
struct MrKeyTag {};
struct PdHandleTag {};
struct CqHandleTag {};
struct SrqHandleTag {};
struct ClientIdTag {};

// A queue pair number: 24 bits on the wire (BTH DestQP, IBA 9.2).
using Qpn = Id<QpnTag>;
// A memory key, local or remote (mr/keys.h): uroce gives an MR one key that
// is both its lkey and its rkey (mr::Registered), so the two are one type.
using MrKey = Id<MrKeyTag>;
// Handles of a client's objects (control protocol, abi/control.h).
using PdHandle = Id<PdHandleTag>;
using CqHandle = Id<CqHandleTag>;
using SrqHandle = Id<SrqHandleTag>;
// A connected client of the daemon (the owner of every object it makes).
using ClientId = Id<ClientIdTag>;

}  // namespace uroce
