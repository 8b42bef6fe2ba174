"""`uroce exec` inside the interop guest, where rdma_rxe has loaded the
kernel's RDMA stack (ib_core answers RDMA netlink with rxe0): a program under
it must list the uroce device all the same (docs/provider.md, "RDMA netlink").
Stock libibverbs lists devices over RDMA netlink and reads uroce's sysfs tree
only when that fails; before the preload library refused the socket, such a
program listed rxe0 alone.

The guest gets, through its 9p share: the host uroced's published sysfs tree
(a copy: listing devices opens none, so no daemon runs in the guest), the
uroce CLI, the provider and the preload library laid out as a build tree (so
`uroce exec` finds the provider as on the host), and the shared libraries of
those three that the guest lacks (libstdc++ and the like), on LD_LIBRARY_PATH.
It runs `ibv_devinfo -l` as is (the kernel's list: rxe0, which shows netlink
answers in this guest) and under `uroce exec` (uroce's device, and not rxe0).
"""

import os
import re
import shutil
import subprocess

import build_guest  # tests/interop/guest, on sys.path through interop_env

SHARE_DIR = "uroce-exec"  # under the guest's /jobs
TREE_FILES = {  # build-tree path: what it is
    "tools/uroce/uroce": "the CLI",
    "verbs_provider/liburoce-rdmav34.so": "the provider",
    "verbs_provider/liburoce-preload.so": "the preload library",
}


def build_root(uroce):
    """The build directory holding `uroce` (BUILD/tools/uroce/uroce)."""
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(uroce))))


def guest_library_names():
    """File names of the shared libraries the guest image holds."""
    programs = [shutil.which(p, path="/usr/sbin:/usr/bin:/sbin:/bin") for p in build_guest.PROGRAMS]
    libs = build_guest.shared_library_closure([p for p in programs if p] + [build_guest.EXTRA_FILES[0]])
    return {os.path.basename(p) for p in libs} | {os.path.basename(p) for p in build_guest.EXTRA_FILES}


def copy_stripped(src, dest):
    """A copy without debug information: the guest reads it over 9p under TCG."""
    os.makedirs(os.path.dirname(dest), exist_ok=True)
    if subprocess.run(["strip", "--strip-debug", "-o", dest, src], capture_output=True).returncode != 0:
        shutil.copy2(src, dest)


def stage(jobs, uroce, state):
    """Puts the files in the share; returns (guest directory, the device's
    uverbs node name) or raises FileNotFoundError naming what is missing."""
    root = build_root(uroce)
    share = os.path.join(jobs, SHARE_DIR)
    tree = os.path.join(share, "tree")
    paths = []
    for rel, what in TREE_FILES.items():
        src = os.path.join(root, rel)
        if not os.path.exists(src):
            raise FileNotFoundError(f"{what} {src} is not built")
        copy_stripped(src, os.path.join(tree, rel))
        paths.append(src)
    os.makedirs(os.path.join(tree, "meson-info"), exist_ok=True)  # how uroce knows a build tree
    have = guest_library_names()
    lib = os.path.join(share, "lib")
    os.makedirs(lib, exist_ok=True)
    for p in sorted(build_guest.shared_library_closure(paths)):
        if os.path.basename(p) not in have:
            shutil.copy2(os.path.realpath(p), os.path.join(lib, os.path.basename(p)))
    shutil.copytree(os.path.join(state, "sys"), os.path.join(share, "state", "sys"), symlinks=True)
    uverbs = os.listdir(os.path.join(share, "state", "sys", "class", "infiniband_verbs"))
    nodes = [n for n in uverbs if n.startswith("uverbs")]
    return f"/jobs/{SHARE_DIR}", nodes[0] if nodes else None


def script(guest_dir, uverbs_node):
    lines = []
    if uverbs_node:
        # The node uroced makes beside its tree (docs/daemon.md), which
        # libibverbs insists on opening.
        lines.append(f"ln -sf /dev/null /dev/infiniband/{uverbs_node}")
    lines += [
        "echo '--- kernel'",
        "ibv_devinfo -l",
        "echo '--- uroce exec'",
        f"LD_LIBRARY_PATH={guest_dir}/lib {guest_dir}/tree/tools/uroce/uroce exec"
        f" --state-dir {guest_dir}/state -- ibv_devinfo -l",
    ]
    return "\n".join(lines)


def listed(out, section):
    """Device names `ibv_devinfo -l` printed in `section` of the output."""
    m = re.search(rf"^--- {section}\n(.*?)(?=^--- |\Z)", out, re.M | re.S)
    if not m:
        return []
    body = m.group(1)
    found = body.find("found:")
    return body[found + len("found:"):].split() if found >= 0 else []


def check(guest, uroce, state, uroce_device, rxe_device, seconds=180):
    """(ok, one line saying what was seen, the job's output)."""
    try:
        guest_dir, node = stage(guest.jobs, uroce, state)
    except FileNotFoundError as e:
        return False, f"cannot stage: {e}", ""
    rc, out = guest.run(script(guest_dir, node), seconds=seconds, label="uroce-exec-devices")
    kernel, under_exec = listed(out, "kernel"), listed(out, "uroce exec")
    ok = rc == 0 and rxe_device in kernel and uroce_device in under_exec and rxe_device not in under_exec
    line = (f"ibv_devinfo -l: {' '.join(kernel) or 'nothing'}; under uroce exec: "
            f"{' '.join(under_exec) or 'nothing'} (job exit {rc})")
    return ok, line, out
