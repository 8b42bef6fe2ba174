"""The plugin exports only what applications may call (uroce_dv.h), and the
preload library only the two verbs it replaces, its one helper, the libc
calls through which it emulates the rdma_cm device (docs/rdmacm-device.md) and
socket() (RDMA netlink refused, docs/provider.md): nothing
of uroce's internals leaks into a program's symbol namespace.

usage: check_exports.py PLUGIN PRELOAD
"""

import shutil
import subprocess
import sys

EXPECTED = {
    0: {"uroce_dv_reg_mr_relaxed", "uroce_dv_dereg_mr_relaxed", "uroce_dv_flush_relaxed_mr"},
    1: {"ibv_create_comp_channel", "ibv_destroy_comp_channel", "uroce_comp_channel_notify_fd",
        # /dev/infiniband/rdma_cm: opened, stat'ed, written and closed by librdmacm
        "open", "open64", "openat", "openat64", "__open_2", "__open64_2", "__openat_2", "__openat64_2",
        "fstat", "fstat64", "__fxstat", "__fxstat64", "write", "close",
        # NETLINK_RDMA refused, so libibverbs and librdmacm read uroced's sysfs tree
        "socket"},
}


def exported(path):
    out = subprocess.run(["nm", "-D", "--defined-only", path], capture_output=True, text=True, check=True).stdout
    names = set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1] in ("T", "W", "D", "B", "V", "i"):
            names.add(parts[2].split("@")[0])
    return names - {"_init", "_fini"}


def main():
    if shutil.which("nm") is None:
        print("SKIP: nm (binutils) not installed")
        return 77
    failures = 0
    for i, path in enumerate(sys.argv[1:3]):
        got = exported(path)
        if got != EXPECTED[i]:
            print(f"FAIL {path}: exports {sorted(got)}, expected {sorted(EXPECTED[i])}")
            failures += 1
        else:
            print(f"ok   {path}: {sorted(got)}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
