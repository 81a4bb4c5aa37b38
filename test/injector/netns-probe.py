# Probes the enforce rules from inside a network namespace they were installed in, as the agent
# (UID 1000) and as the proxy (UID 1337) would send, and watches the wire: every frame that
# leaves by d0 arrives at its veth peer d1, where a packet socket reads it. Run as root by
# iptables-netns.test.ts, which reads the JSON it prints. Python, not Node: packet sockets,
# unprivileged ICMP echo sockets and setuid per probe.
import encodings.idna  # noqa: F401  (loaded before setuid: the interpreter's files may be root's)
import json
import os
import socket
import sys
import time

PROXY_PORT = int(sys.argv[1])
NAMESERVER = sys.argv[2]
v4, v6 = socket.AF_INET, socket.AF_INET6


def as_user(uid, probe):
    """Runs probe() in a child as uid; returns what it returned."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            os.setgid(uid)
            os.setuid(uid)
            out = probe()
        except Exception as e:  # noqa: BLE001
            out = f"error {e}"
        os.write(w, out.encode())
        os._exit(0)
    os.close(w)
    os.waitpid(pid, 0)
    with os.fdopen(r) as f:
        return f.read()


def send(family, kind, address, tag):
    """Sends one datagram whose payload is `tag`, so the wire tells who sent what."""

    def probe():
        if kind == "icmp":
            proto = socket.IPPROTO_ICMP if family == v4 else socket.IPPROTO_ICMPV6
            s = socket.socket(family, socket.SOCK_DGRAM, proto)
            packet = (b"\x08" if family == v4 else b"\x80") + b"\x00\x00\x00\x00\x01\x00\x01" + tag.encode()
        else:
            s = socket.socket(family, socket.SOCK_DGRAM)
            packet = tag.encode()
        try:
            s.sendto(packet, address)
            return "sent"
        except PermissionError:
            return "refused"
        finally:
            s.close()

    return probe


def join_groups():
    """Joins multicast groups whose addresses carry bytes of the agent's choosing."""
    s4 = socket.socket(v4, socket.SOCK_DGRAM)
    s4.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP,
                  socket.inet_aton("239.65.66.67") + socket.inet_aton("10.99.0.1"))
    s6 = socket.socket(v6, socket.SOCK_DGRAM)
    group = socket.inet_pton(v6, "ff0e:5345:4352:4554::1")
    s6.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_JOIN_GROUP, group + socket.if_nametoindex("d0").to_bytes(4, "little"))
    time.sleep(0.5)
    return "joined"


def connect(address):
    def probe():
        s = socket.socket(v4, socket.SOCK_STREAM)
        s.settimeout(2)
        s.connect(address)
        s.close()
        return "connected"

    return probe


wire = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0003))
wire.bind(("d1", 0))
wire.setblocking(False)

listener = socket.socket()
listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
listener.bind(("127.0.0.1", PROXY_PORT))
listener.listen(8)
listener.settimeout(2)

results = {
    "agent_tcp": as_user(1000, connect(("10.99.0.2", 80))),
    "agent_udp": as_user(1000, send(v4, "udp", ("10.99.0.2", 9999), "agent-udp")),
    "agent_dns": as_user(1000, send(v4, "udp", (NAMESERVER, 53), "agent-dns")),
    "agent_icmp": as_user(1000, send(v4, "icmp", ("10.99.0.2", 0), "agent-icmp")),
    "agent_icmp6": as_user(1000, send(v6, "icmp", ("fd99::2", 0), "agent-icmp6")),
    "agent_udp6": as_user(1000, send(v6, "udp", ("fd99::2", 9999), "agent-udp6")),
    "proxy_icmp": as_user(1337, send(v4, "icmp", ("10.99.0.2", 0), "proxy-icmp")),
    "proxy_icmp6": as_user(1337, send(v6, "icmp", ("fd99::2", 0), "proxy-icmp6")),
    "proxy_udp": as_user(1337, send(v4, "udp", ("10.99.0.2", 9999), "proxy-udp")),
    "proxy_udp6": as_user(1337, send(v6, "udp", ("fd99::2", 9999), "proxy-udp6")),
    # No neighbour entry for fd99::3: the kernel asks for one (a neighbour solicitation) first.
    "proxy_unknown_neighbour": as_user(1337, send(v6, "udp", ("fd99::3", 9999), "proxy-ask")),
    "agent_joins": as_user(1000, join_groups),
}
try:
    conn, _ = listener.accept()
    results["redirected_to_proxy_port"] = True
    conn.close()
except socket.timeout:
    results["redirected_to_proxy_port"] = False

time.sleep(1.5)
tags, solicitations, igmp, mld = set(), 0, 0, 0
while True:
    try:
        frame = wire.recv(65535)
    except BlockingIOError:
        break
    for tag in ("agent-udp6", "agent-udp", "agent-dns", "agent-icmp6", "agent-icmp",
                "proxy-icmp6", "proxy-icmp", "proxy-udp6", "proxy-udp"):
        if tag.encode() in frame:  # longer tags first: agent-udp is in agent-udp6
            tags.add(tag)
            break
    # Ethernet, IPv6 (next header 58, ICMPv6), type 135: a neighbour solicitation.
    if frame[12:14] == b"\x86\xdd" and frame[20] == 58 and frame[54] == 135:
        solicitations += 1
    # IPv4 protocol 2: IGMP. IPv6 with a hop-by-hop header first (router alert): MLD.
    if frame[12:14] == b"\x08\x00" and frame[23] == 2:
        igmp += 1
    if frame[12:14] == b"\x86\xdd" and frame[20] == 0:
        mld += 1
results["on_the_wire"] = sorted(tags)
results["neighbour_solicitations"] = solicitations
results["multicast_reports"] = igmp + mld
print(json.dumps(results))
