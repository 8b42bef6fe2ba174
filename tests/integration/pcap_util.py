"""Minimal pcap reading and writing for the integration tests (classic
libpcap format, microsecond timestamps, little-endian)."""

import struct

LINKTYPE_ETHERNET = 1


def read_frames(path):
    with open(path, "rb") as f:
        data = f.read()
    magic = struct.unpack("<I", data[:4])[0]
    if magic not in (0xA1B2C3D4, 0xA1B23C4D):
        raise ValueError(f"{path}: not a little-endian classic pcap file")
    frames, off = [], 24
    while off < len(data):
        _sec, _usec, incl, _orig = struct.unpack("<IIII", data[off:off + 16])
        off += 16
        frames.append(data[off:off + incl])
        off += incl
    return frames


def write_pcap(path, frames, linktype=LINKTYPE_ETHERNET, original_lengths=None):
    with open(path, "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, linktype))
        for i, fr in enumerate(frames):
            orig = original_lengths[i] if original_lengths else len(fr)
            f.write(struct.pack("<IIII", i, 0, len(fr), orig))
            f.write(fr)
