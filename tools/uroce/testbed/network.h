// The testbed's network, made with iproute2's `ip`: network namespaces, the
// veth pair or the bridge joining them, addresses.
//
// Why `ip` and not rtnetlink from C++: each step is one line a user can
// read in the error message and type by hand to see what went wrong, it is
// what the dataflow tests' harness does already, and iproute2 is on every
// machine that has namespaces; a netlink client would add a library
// (libmnl) and several hundred lines for a few dozen calls per testbed.
#pragma once

#include <set>
#include <string>

#include "plan.h"

namespace uroce::tools::testbed {

// Every step either succeeds or returns why not (the command and its
// output); empty means success.
[[nodiscard]] std::string add_namespace(const std::string& netns);
// Deletes the namespace if it exists; its interfaces go with it, and a veth
// pair goes when either end's namespace does.
[[nodiscard]] std::string delete_namespace(const std::string& netns);
// The namespaces `ip netns list` knows.
[[nodiscard]] std::set<std::string> existing_namespaces();

// The links: two nodes' ends directly, or every node to the bridge.
[[nodiscard]] std::string make_links(const Plan& plan);
// The node's interface up with the plan's MTU and both addresses, and lo up.
[[nodiscard]] std::string configure_node(const Plan& plan, const NodePlan& node);
// "veth0@uroce-tb-n1 <-> veth0@uroce-tb-n2", for the record and messages.
[[nodiscard]] std::vector<std::string> describe_links(const Plan& plan);

}  // namespace uroce::tools::testbed
