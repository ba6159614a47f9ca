#!/usr/bin/env python3
"""remote_exec.py: runs a program on the other VM of the two-host lane with its stdin and stdout
connected to the caller's, as ssh would between real hosts (the lane's VMs have no ssh). What
rdma_stress --remote needs to start its ranks on the second host.

  remote_exec.py serve DIR ADDR
      Listens on ADDR at a port the kernel picks and publishes that port in DIR/exec.ADDR
      (written aside, then renamed). Each connection sends one line, the program's argv as a JSON
      list; the program then runs with its stdin and stdout relayed over the connection (stderr:
      the server's), and the server sends "\\x1eexit <code>\\n" once it ended. The program is
      SIGKILLed when the connection closes before it ended: the caller died (rdma_stress --kill
      SIGKILLs it), so the program dies too. Serves until killed.
  remote_exec.py connect DIR ADDR ARG...
      Runs ARG... on the server of ADDR (its port read from DIR/exec.ADDR): relays this process's
      stdin and stdout, exits with the program's exit code (255 when the connection ended
      without one). Its stdin closing does not end the program (rdma_stress's parent says "exit"
      in a line); this process dying does.

Invariants:
  1. No port is chosen by one process and bound by another: the server binds port 0 and
     publishes what it got; the caller only connects.
  2. A program outlives its caller never: a connection's end before the program's kills it.
  3. The serve side executes whatever a connection asks: it listens only on the lane's private
     wire between two VMs, never on a host's network.
"""
import json
import os
import selectors
import signal
import socket
import subprocess
import sys
import threading

TRAILER = b"\x1eexit "


def publish(path: str, text: str) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text + "\n")
    os.rename(tmp, path)


def serve_one(conn: socket.socket) -> None:
    reader = conn.makefile("rb")
    argv = json.loads(reader.readline())
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0)

    def to_program() -> None:  # invariant 2: the connection's end kills the program
        while True:
            data = reader.read1(65536)
            if not data:
                break
            try:
                proc.stdin.write(data)
            except BrokenPipeError:
                break
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)

    threading.Thread(target=to_program, daemon=True).start()
    while True:
        data = proc.stdout.read(65536)
        if not data:
            break
        try:
            conn.sendall(data)
        except OSError:
            break
    code = proc.wait()
    try:
        conn.sendall(TRAILER + str(code if code >= 0 else 128 - code).encode() + b"\n")
    except OSError:
        pass
    conn.close()


def serve(directory: str, addr: str) -> None:
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind((addr, 0))  # invariant 1
    listener.listen(64)
    publish(os.path.join(directory, "exec." + addr), str(listener.getsockname()[1]))
    while True:
        conn, _ = listener.accept()
        threading.Thread(target=serve_one, args=(conn,), daemon=True).start()


def connect(directory: str, addr: str, argv: list) -> int:
    with open(os.path.join(directory, "exec." + addr)) as f:
        port = int(f.read())
    conn = socket.create_connection((addr, port), timeout=30)
    conn.settimeout(None)
    conn.sendall(json.dumps(argv).encode() + b"\n")
    sel = selectors.DefaultSelector()
    sel.register(conn, selectors.EVENT_READ)
    sel.register(sys.stdin.fileno(), selectors.EVENT_READ)
    pending = b""
    while True:
        for key, _ in sel.select():
            if key.fileobj == conn:
                data = conn.recv(65536)
                if not data:
                    os.write(1, pending)
                    return 255
                pending += data
                # Everything up to the last newline goes out, but never the trailer itself.
                while b"\n" in pending:
                    line, pending = pending.split(b"\n", 1)
                    at = line.find(TRAILER)
                    if at >= 0:
                        os.write(1, line[:at] + b"\n" if at > 0 else b"")
                        return int(line[at + len(TRAILER):])
                    os.write(1, line + b"\n")
            else:
                data = os.read(sys.stdin.fileno(), 65536)
                if not data:
                    sel.unregister(sys.stdin.fileno())  # the program goes on (see above)
                else:
                    conn.sendall(data)


def main() -> None:
    if len(sys.argv) == 4 and sys.argv[1] == "serve":
        serve(sys.argv[2], sys.argv[3])
    elif len(sys.argv) >= 5 and sys.argv[1] == "connect":
        sys.exit(connect(sys.argv[2], sys.argv[3], sys.argv[4:]))
    else:
        sys.exit("usage: remote_exec.py serve DIR ADDR | connect DIR ADDR ARG...")


if __name__ == "__main__":
    main()
