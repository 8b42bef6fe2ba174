#!/usr/bin/env python3
"""Print the project's headers (relative to the source root, one per line)
under the directories given as arguments, for the self-containment check in
tests/headers/meson.build."""
import pathlib
import sys

root = pathlib.Path(sys.argv[1])
for top in sys.argv[2:]:
    for header in sorted((root / top).rglob('*.h')):
        print(header.relative_to(root).as_posix())
