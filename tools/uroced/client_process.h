// Which process a control connection speaks for, and how the daemon reaches
// it without ever naming it by pid (docs/security.md).
//
// At HELLO the client hands over two files it opened itself: /proc/self/mem
// (read-write) and /proc/self/maps. The kernel binds both to the client's
// address space when they are opened, so through them the daemon reaches
// exactly what the client can reach itself, and nothing once the client
// execs (a setuid program included) or exits, whichever process has the
// pid by then. A pidfd of the connecting process tells the daemon when it
// exits, so its objects go even while a forked child keeps the socket open.
#pragma once

#include <sys/types.h>

#include <span>

#include "common/unique_fd.h"

namespace uroce::daemon {

// The files a HELLO carries (abi/control.h), in this order.
struct ProcessFiles {
    UniqueFd mem;   // /proc/<pid>/mem, opened O_RDWR
    UniqueFd maps;  // /proc/<pid>/maps
};

// Checks that `fds` are exactly a mem file opened for reading and writing
// and a maps file, both in procfs (anything else could make the daemon's
// single thread block or reach a file that is not process memory), and
// takes copies of them. 0, or EINVAL (wrong count, kind or mode).
int take_process_files(std::span<const int> fds, ProcessFiles& out);

// A pidfd of the process at the other end of `socket` (SO_PEERPIDFD, Linux
// 6.5; else pidfd_open of the SO_PEERCRED pid): readable once that process
// has exited. Empty when neither works (then exit is noticed at the
// client's next request or by check_clients).
UniqueFd peer_pidfd(int socket, pid_t pid);

}  // namespace uroce::daemon
