#!/usr/bin/env python3
"""Print the ninja targets the tests of some meson suites need, one per line.

usage: tools/suite-targets.py BUILD_DIR SUITE [SUITE ...]

`ninja -C BUILD_DIR $(tools/suite-targets.py BUILD_DIR unit stress)` then
builds only what those suites run (each test's program, the targets in its
arguments and its `depends:`; ninja adds the libraries they link), so a
sanitizer build that runs three suites does not compile the programs only
the dataflow and interop suites use. Run the suites afterwards with
`meson test --no-rebuild`, which would otherwise build everything.
"""

import json
import os
import subprocess
import sys


def introspect(build_dir, what):
    out = subprocess.check_output(["meson", "introspect", what, build_dir])
    return json.loads(out)


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__.strip())
    build_dir = sys.argv[1]
    wanted = set(sys.argv[2:])
    tests = introspect(build_dir, "--tests")
    chosen = [t for t in tests
              if wanted & {s.split(":")[-1] for s in t["suite"]}]
    if not chosen:
        sys.exit(f"suite-targets: no test in {build_dir} is in {sorted(wanted)}")
    ids = {dep for t in chosen for dep in t["depends"]}
    build_root = os.path.realpath(build_dir)
    outputs = set()
    for target in introspect(build_dir, "--targets"):
        if target["id"] in ids:
            outputs.update(os.path.relpath(f, build_root) for f in target["filename"])
    print("\n".join(sorted(outputs)))


if __name__ == "__main__":
    main()
