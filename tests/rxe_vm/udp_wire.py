#!/usr/bin/env python3
"""udp_wire.py FD_A FD_B CMD [ARG...]: the virtual Ethernet wire of run_two_hosts.sh.

Opens two UDP sockets on 127.0.0.1, each bound to a port the kernel picks (port 0) and connected
to the other one, as file descriptors FD_A and FD_B (inherited across exec), then execs CMD,
which hands one to each VM's qemu (`-netdev dgram,local.type=fd,local.str=FD`): a frame one VM
sends arrives at the other. No port is chosen by one process and bound by another (the kernel
binds both here, before any VM starts, and nothing else names them), nothing needs root.
Why UDP and not unix datagram sockets: a unix datagram socket whose reader stopped (a VM whose
NIC is down) blocks its writer, so the other VM's NIC would stop completing its sends, which no
Ethernet link does; a UDP socket drops what its reader does not take, as a wire to a dead port.
Each end's receive buffer is large (RECEIVE_BUFFER): the two emulated VMs run at uneven speeds,
and rxe has no congestion control, so a 32 MiB READ's response burst into a default-sized buffer
(~208 KiB) lost most frames and timed out; RoCE fabrics are lossless (PFC) for that reason.
"""
import os
import socket
import sys

RECEIVE_BUFFER = 128 << 20  # bytes of frames (kernel accounting) an end holds for a slow reader
SO_RCVBUFFORCE = getattr(socket, "SO_RCVBUFFORCE", 33)


def main() -> None:
    if len(sys.argv) < 4:
        sys.exit("usage: udp_wire.py FD_A FD_B CMD [ARG...]")
    fds = int(sys.argv[1]), int(sys.argv[2])
    ends = [socket.socket(socket.AF_INET, socket.SOCK_DGRAM) for _ in fds]
    for end in ends:
        try:  # beyond net.core.rmem_max: needs CAP_NET_ADMIN (CI runs as root)
            end.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, RECEIVE_BUFFER)
        except PermissionError:
            end.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, RECEIVE_BUFFER)
        end.bind(("127.0.0.1", 0))
    ends[0].connect(ends[1].getsockname())
    ends[1].connect(ends[0].getsockname())
    for end, fd in zip(ends, fds):
        os.dup2(end.fileno(), fd, inheritable=True)
        end.close()
    os.execvp(sys.argv[3], sys.argv[3:])


if __name__ == "__main__":
    main()
