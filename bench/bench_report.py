#!/usr/bin/env python3
"""Turns the raw outputs of bench_in_vm.sh into a table, ratio lines, a CSV and a PNG plot.

usage: bench_report.py OUTDIR        (reads perftest.txt, rdma_bench.txt, the latency rounds,
                                     native/ and kv.txt there)
       bench_report.py --kv OUTDIR   (only kv.txt: kv_store beside redis)
"""
import csv
import os
import statistics
import sys


def parse_perftest(path):
    bw = {}   # (op, size) -> MB/s
    lat = {}  # op -> (typical_us, p99_us)
    tool = None
    if not os.path.exists(path):
        return bw, lat
    for line in open(path, errors="replace"):
        if line.startswith("== "):
            tool = line.split()[1]
            continue
        parts = line.split()
        if len(parts) < 5 or not parts[0].isdigit():
            continue
        size = int(parts[0])
        if tool in ("ib_write_bw", "ib_read_bw"):
            bw[(tool[3:].split("_")[0], size)] = float(parts[3])  # BW average [MB/sec]
        elif tool in ("ib_read_lat", "ib_write_lat") and len(parts) >= 8:
            # bytes iters t_min t_max t_typical t_avg t_stdev 99% 99.9%
            lat[tool[3:].split("_")[0]] = (float(parts[4]), float(parts[7]))
    return bw, lat


# What each path's 8-byte latency is compared with. An RDMA READ is a round trip, and so is a
# WRITE that waits for its completion (the responder's ACK): that is what the bench times. Yet
# ib_read_lat reports the read's round trip while ib_write_lat reports HALF of its ping-pong
# round trip (one-way latency), so writes are compared with twice its figure.
REF_FACTOR = {"read": 1.0, "write": 2.0}
REF_SUFFIX = {"read": "", "write": "_round_trip"}


def ref_lat(plat, op):
    return plat[op][0] * REF_FACTOR[op]


def parse_bench(path):
    bw, lat, extra = {}, {}, {"csw": {}}
    if not os.path.exists(path):
        return bw, lat, extra
    for line in open(path):
        p = line.split()
        if not p:
            continue
        if p[0] == "csw" and len(p) == 5:
            # (path, op) -> (this process's, the peer process's or None) switches per op
            extra["csw"][(p[1], p[2])] = (float(p[3]), None if p[4] == "-" else float(p[4]))
        elif p[0] == "bw":
            bw[(p[1], p[2], int(p[3]))] = float(p[4])
        elif p[0] == "lat":
            lat[(p[1], p[2])] = (float(p[4]), float(p[5]))
        elif p[0] == "reg":
            extra["reg_first_us"] = float(p[3])
            extra["reg_cached_us"] = float(p[5])
            if len(p) > 7:
                extra["reg_handle_us"] = float(p[7])
        elif p[0] == "peak_rss_kb":
            extra["peak_rss_kb"] = int(p[1])
        elif p[0] == "registered_bytes":
            extra["registered_bytes_" + p[1]] = int(p[2])
    return bw, lat, extra


def parse_kv(path):
    """kv.txt (kv_vs_redis.sh) -> {(system, size, clients): {round: (ops_s, p50_us, client_csw,
    server_csw)}}"""
    runs = {}
    if not os.path.exists(path):
        return runs
    for line in open(path):
        p = line.split()
        if len(p) == 9 and p[0] == "kv":
            runs.setdefault((p[1], int(p[2]), int(p[3])), {})[int(p[4])] = tuple(
                float(x) for x in p[5:9])
    return runs


def report_kv(out):
    """Prints kv_store beside redis (medians over rounds); returns the ratio lines."""
    runs = parse_kv(os.path.join(out, "kv.txt"))
    ratios = []
    if not runs:
        return ratios
    print("\nkey-value GET, natively (kv_store's fallback path; kv_vs_redis.sh), median of "
          "rounds:")
    print(f"  {'value':>6} {'clients':>7} {'kv ops/s':>10} {'kv p50 us':>10} {'redis ops/s':>12} "
          f"{'redis p50 us':>13} {'kv/redis':>9}   csw/op client+server: kv, redis")
    for size, clients in sorted({(s, c) for (_, s, c) in runs}):
        kv = runs.get(("kv", size, clients), {})
        rd = runs.get(("redis", size, clients), {})
        med = lambda d, i: statistics.median(v[i] for v in d.values()) if d else None
        paired = [kv[r][0] / rd[r][0] for r in kv if r in rd and rd[r][0] > 0]
        ratio = statistics.median(paired) if paired else None
        f = lambda v, spec: format(v, spec) if v is not None else "-"
        print(f"  {human(size):>6} {clients:>7} {f(med(kv, 0), '.0f'):>10} "
              f"{f(med(kv, 1), '.1f'):>10} {f(med(rd, 0), '.0f'):>12} {f(med(rd, 1), '.1f'):>13} "
              f"{f(ratio, '.3f'):>9}   {f(med(kv, 2), '.2f')}+{f(med(kv, 3), '.2f')}, "
              f"{f(med(rd, 2), '.2f')}+{f(med(rd, 3), '.2f')}")
        if ratio is not None:
            ratios.append((f"kv_get_{human(size).lower()}_vs_redis", ratio))
        p50s = [kv[r][1] / rd[r][1] for r in kv if r in rd and rd[r][1] > 0]
        if p50s:
            ratios.append((f"kv_get_{human(size).lower()}_p50_vs_redis_p50",
                           statistics.median(p50s)))
    return ratios


# The native rounds' paths (bench_native.sh): references first, then the fallback's.
NATIVE_PATHS = (("tcp-lat", "rtt"), ("futex-lat", "rtt"), ("caf-rtt", "rtt"),
                ("caf-rtt-blocking", "rtt"), ("same-host", "read"), ("same-host", "write"),
                ("fallback-lane", "read"), ("fallback", "read"),
                ("fallback-async", "read"), ("fallback-lane", "write"), ("fallback", "write"),
                ("fallback-async", "write"))


def report_copies(native):
    """Same-host copies of 64 MiB (cross-memory attach) against memcpy of 64 MiB, in rounds
    (bench_native.sh's copy_<r>.*): one copy at a time (a program's read() or write():
    same-host-one) and batched through the manager (same-host), with buffers the library
    allocated (.bench) and with the program's std::vector memory (.user). Per round, the lower
    of read and write over that round's memcpy; the ratio printed is the median over rounds."""
    ratios = []
    per_name = {}
    r = 1
    while os.path.exists(os.path.join(native, f"copy_{r}.memcpy")):
        mc, _, _ = parse_bench(os.path.join(native, f"copy_{r}.memcpy"))
        big = mc.get(("memcpy", "copy", 64 << 20))
        for suffix, memory in ((".bench", ""), (".user", "_user_memory")):
            sh, _, _ = parse_bench(os.path.join(native, f"copy_{r}{suffix}"))
            for path, kind in (("same-host-one", "copy"), ("same-host", "batch_copy")):
                copies = {op: sh.get((path, op, 64 << 20)) for op in ("read", "write")}
                if not big or not all(copies.values()):
                    continue
                name = f"same_host{memory}_{kind}_64M_vs_memcpy"
                per_name.setdefault(name, []).append(
                    (min(copies.values()) / big, copies, big))
        r += 1
    if per_name:
        print(f"\nsame-host 64 MiB copies between two nodes / memcpy 64 MiB, {r - 1} rounds "
              "(MB/s per round: read, write, memcpy):")
    for name, rounds in per_name.items():
        print(f"  {name:<44} " + "; ".join(
            f"{c['read']:.0f} {c['write']:.0f} {m:.0f}" for _, c, m in rounds)
            + f"  -> median ratio {statistics.median(x for x, _, _ in rounds):.3f}")
        ratios.append((name, statistics.median(x for x, _, _ in rounds)))
    return ratios


def report_native(native):
    """Prints the native references beside the fallback (bench_native.sh's native/ folder);
    returns the ratio lines. Per-round ratios pair figures taken seconds apart; the ratio
    printed is their median, the absolute figures are medians over rounds."""
    ratios = []
    rounds = []
    r = 1
    while os.path.exists(os.path.join(native, f"round_{r}.ref")):
        _, ref, ref_extra = parse_bench(os.path.join(native, f"round_{r}.ref"))
        _, fb, fb_extra = parse_bench(os.path.join(native, f"round_{r}.bench"))
        rounds.append(({**ref, **fb}, {**ref_extra["csw"], **fb_extra["csw"]}))
        r += 1
    copy, _, _ = parse_bench(os.path.join(native, "memcpy.txt"))
    if copy:
        print("\nmemcpy within one process, natively (memcpy_bw, median of 5 runs):")
        for (_, _, size), v in sorted(copy.items(), key=lambda kv: kv[0][2]):
            print(f"  {human(size):>6} {v:>10.0f} MB/s")
        big = copy.get(("memcpy", "copy", 64 << 20))
        if big:
            ratios.append(("memcpy_64m_MBps", big))
    ratios += report_copies(native)
    if rounds:
        print(f"\nlatency 8 B natively, two processes unless noted, {len(rounds)} rounds "
              f"(median us per round; csw/op: this process + the peer process)")
        med = {}
        for path, op in NATIVE_PATHS:
            vals = [lat[(path, op)] for lat, _ in rounds if (path, op) in lat]
            sws = [sw[(path, op)] for _, sw in rounds if (path, op) in sw]
            if not vals:
                continue
            med[(path, op)] = statistics.median(v[0] for v in vals)
            p99 = statistics.median(v[1] for v in vals)
            own = statistics.median(s[0] for s in sws) if sws else None
            peers = [s[1] for s in sws if s[1] is not None]
            peer = statistics.median(peers) if peers else None
            sw = "-" if own is None else f"{own:.2f}" + (f"+{peer:.2f}" if peer is not None
                                                          else " (one process)")
            cells = "  ".join(f"{v[0]:7.1f}" for v in vals)
            print(f"  {path + ' ' + op:24} {cells}   median {med[(path, op)]:7.1f}  "
                  f"p99 {p99:7.1f}  csw/op {sw}")

        def paired(num, den):
            rs = [lat[num][0] / lat[den][0] for lat, _ in rounds
                  if num in lat and den in lat and lat[den][0] > 0]
            return statistics.median(rs) if rs else None

        for name, num, den in (
                ("fallback_read_lat_vs_tcp_lat", ("fallback-lane", "read"), ("tcp-lat", "rtt")),
                ("fallback_manager_read_lat_vs_tcp_lat", ("fallback", "read"),
                 ("tcp-lat", "rtt")),
                ("fallback_actor_read_vs_caf_rtt", ("fallback-async", "read"),
                 ("caf-rtt", "rtt")),
                ("caf_rtt_vs_tcp_lat", ("caf-rtt", "rtt"), ("tcp-lat", "rtt")),
                ("same_host_read_lat_vs_futex_lat", ("same-host", "read"), ("futex-lat", "rtt")),
                ("same_host_write_lat_vs_futex_lat", ("same-host", "write"),
                 ("futex-lat", "rtt"))):
            v = paired(num, den)
            if v is not None:
                ratios.append((name, v))
        for name, key in (("tcp_lat_us", ("tcp-lat", "rtt")), ("futex_lat_us", ("futex-lat", "rtt")),
                          ("caf_rtt_us", ("caf-rtt", "rtt"))):
            if key in med:
                ratios.append((name, med[key]))
    ins = os.path.join(native, "instructions.txt")
    if os.path.exists(ins):
        print("\nuser-space instructions per 8-byte round trip, natively (callgrind, both "
              "processes; fallback: read and write averaged, CAF's sharing scheduler):")
        for line in open(ins):
            p = line.split()
            if len(p) == 3 and p[0] == "instructions":
                print(f"  {p[1]:12} {int(p[2]):>8}")
    return ratios


def report_striping(out):
    """Prints two devices against one (striping.txt); returns the ratio lines."""
    path = os.path.join(out, "striping.txt")
    ratios = []
    if not os.path.exists(path):
        return ratios
    busy = {}
    print("\nstriping over 2 devices against 1 (through the manager, same run; busy = the "
          "machine's CPUs):")
    for line in open(path):
        p = line.split()
        if p[:1] == ["cpu-busy"] and len(p) == 5:
            busy[(p[1], p[2], int(p[3]))] = float(p[4])
        elif p[:1] == ["striping"] and len(p) >= 9 and p[-6:-3] == ["/", "1", "device"]:
            # "striping 2 devices / 1 device OP SIZE RATIO", "striping 2x queue pairs / ..."
            two_devices = p[2] == "devices"
            op, size, ratio = p[-3], int(p[-2]), float(p[-1])
            other = "striping-2dev" if two_devices else "striping-1dev-2xqp"
            b1 = busy.get(("striping-1dev", op, size))
            b2 = busy.get((other, op, size))
            cpu = f"   busy {b1:.2f} -> {b2:.2f}" if b1 is not None and b2 is not None else ""
            what = "2 devices / 1 device" if two_devices else "2x queue pairs / 1 device"
            print(f"  striping {what:26} {op:5} {human(size):>5} {ratio:.3f}{cpu}")
            name = "2dev_vs_1dev" if two_devices else "2xqp_vs_1dev"
            ratios.append((f"striping_{name}_{op}_{human(size).lower()}", ratio))
    return ratios


def report_kv_handoff(out, pbw):
    """Prints the transfer lists' figures (kv_handoff.txt in the VM, native/kv_handoff.txt);
    returns their ratio lines: paged / bulk of the same run, and in the VM paged RDMA /
    ib_read_bw or ib_write_bw at the block size where perftest measured it."""
    ratios = []
    for path in (os.path.join(out, "native", "kv_handoff.txt"), os.path.join(out, "kv_handoff.txt")):
        if not os.path.exists(path):
            continue
        lines = [l.split() for l in open(path)]
        got = [(p[1], float(p[2])) for p in lines if len(p) == 3 and p[0] == "ratio"]
        if not got:
            continue
        print(f"\ntransfer lists (kv-handoff, {os.path.relpath(path, out)}): paged / bulk, same run")
        for name, v in got:
            print(f"  {name:50} {v:.3f}")
            ratios.append((name, v))
        # bw kv-handoff rdma pull 64k c8 prepared MBPS
        for p in lines:
            if len(p) == 8 and p[:2] == ["bw", "kv-handoff"] and p[2] in ("rdma", "rdma-manager"):
                op = "read" if p[3] == "pull" else "write"
                size = int(p[4].rstrip("k")) << 10
                ref = pbw.get((op, size))
                if ref:
                    name = f"kv_handoff_{p[2]}_{p[3]}_{p[4]}_{p[5]}_{p[6]}_vs_ib_{op}_bw"
                    print(f"  {name:50} {float(p[7]) / ref:.3f}")
                    ratios.append((name, float(p[7]) / ref))
    return ratios


def report_cancel(out):
    """Prints the cancel figures (cancel.txt in the VM, native/cancel.txt); returns their ratio
    lines (the slowest cancel / the whole transfer, same run) and each one's slowest cancel in
    ms (issue 50's target: within 10 ms natively)."""
    ratios = []
    for path in (os.path.join(out, "native", "cancel.txt"), os.path.join(out, "cancel.txt")):
        if not os.path.exists(path):
            continue
        lines = [l.split() for l in open(path)]
        # cancel TRANSPORT OP BYTES trials N cancelled C finished F unstarted U median_ms M
        # p99_ms P max_ms X whole_ms W
        rows = [p for p in lines if len(p) == 20 and p[0] == "cancel"]
        if not rows:
            continue
        print(f"\ncancel ({os.path.relpath(path, out)}): at random points, same run")
        for p in rows:
            f = dict(zip(p[4::2], p[5::2]))
            print(f"  {p[1]:10} {p[2]:5} {human(int(p[3])):>5}: {f['cancelled']} of {f['trials']} "
                  f"stopped, median {float(f['median_ms']):.2f} ms, max {float(f['max_ms']):.2f} ms; "
                  f"whole transfer {float(f['whole_ms']):.1f} ms")
            if int(f["cancelled"]) > 0:
                ratios.append((f"cancel_{p[1]}_{p[2]}_max_ms", float(f["max_ms"])))
        ratios += [(p[1], float(p[2])) for p in lines if len(p) == 3 and p[0] == "ratio"]
    return ratios


def report_load(out):
    """Prints the latency-under-load figures (load.txt in the VM, native/load.txt); returns their
    ratio lines (an 8-byte read's p99 while a bulk pull runs / idle, same run; issue 50's target
    with priority classes: within 2)."""
    ratios = []
    for path in (os.path.join(out, "native", "load.txt"), os.path.join(out, "load.txt")):
        if not os.path.exists(path):
            continue
        lines = [l.split() for l in open(path)]
        # load TRANSPORT reads CLASS bulk B idle_p50_us A idle_p99_us B loaded_p50_us C
        # loaded_p99_us D bulk_pulls N bulk_MBps M
        rows = [p for p in lines if len(p) == 18 and p[0] == "load"]
        if not rows:
            continue
        print(f"\nlatency under load ({os.path.relpath(path, out)}): 8-byte reads, same run")
        for p in rows:
            f = dict(zip(p[2::2], p[3::2]))
            print(f"  {p[1]:10} {f['reads'] + ' reads':16} p99 idle {float(f['idle_p99_us']):.0f} us, while a "
                  f"{human(int(f['bulk']))} pull runs {float(f['loaded_p99_us']):.0f} us "
                  f"({f['bulk_MBps']} MB/s pulled)")
        ratios += [(p[1], float(p[2])) for p in lines if len(p) == 3 and p[0] == "ratio"]
    return ratios


def human(n):
    for unit, div in (("M", 1 << 20), ("K", 1 << 10)):
        if n >= div and n % div == 0:
            return f"{n // div}{unit}"
    return str(n)


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--kv":
        for name, value in report_kv(sys.argv[2]):
            print(f"ratio {name} {value:.3f}")
        return
    out = sys.argv[1]
    pbw, plat = parse_perftest(os.path.join(out, "perftest.txt"))
    bw, lat, extra = parse_bench(os.path.join(out, "rdma_bench.txt"))
    rows = []
    ratios = []
    sizes = sorted({s for (_, _, s) in bw})
    print(f"{'op':6} {'size':>6} {'perftest':>10} {'components':>11} {'actor':>9} {'direct':>9} "
          f"{'fallback':>9} {'tcp':>8}  {'comp/pt':>7} {'actor/pt':>8} {'dir/pt':>7} "
          f"{'fb/tcp':>7}   (MB/s)")
    for op in ("write", "read"):
        for s in sizes:
            ref = pbw.get((op, s))
            c = bw.get(("components", op, s))
            a = bw.get(("actor", op, s))
            d = bw.get(("direct", op, s))
            f = bw.get(("fallback", op, s))
            t = bw.get(("tcp", "write", s))
            r = lambda x, y: (x / y) if (x and y) else None
            fmt = lambda v: f"{v:.1f}" if v is not None else "-"
            fr = lambda v: f"{v:.2f}" if v is not None else "-"
            print(f"{op:6} {human(s):>6} {fmt(ref):>10} {fmt(c):>11} {fmt(a):>9} {fmt(d):>9} "
                  f"{fmt(f):>9} {fmt(t):>8}  {fr(r(c, ref)):>7} {fr(r(a, ref)):>8} "
                  f"{fr(r(d, ref)):>7} {fr(r(f, t)):>7}")
            rows.append({"op": op, "size": s, "perftest_MBps": ref, "components_MBps": c,
                         "actor_MBps": a, "direct_MBps": d, "fallback_MBps": f, "tcp_MBps": t})
            for name, v in (("actor", a), ("direct", d)):
                if v and ref and s >= 65536:
                    ratios.append((f"{name}_{op}_bw_{human(s)}_vs_ib_{op}_bw", v / ref))
            if f and t and s == max(sizes):
                ratios.append((f"fallback_{op}_bw_{human(s)}_vs_tcp_loopback", f / t))
            ft = bw.get(("fallback-tls", op, s))
            if ft:
                print(f"{'':6} {'':>6} fallback over mutual TLS: {ft:.1f} MB/s"
                      + (f" ({ft / f:.2f} of plaintext fallback)" if f else ""))
                if f and s == max(sizes):
                    ratios.append((f"fallback_tls_{op}_bw_{human(s)}_vs_fallback", ft / f))
    print()
    # Paired rounds (bench_in_vm.sh): perftest and caf-rdma latency taken right after each other.
    rounds = []
    r = 1
    while os.path.exists(os.path.join(out, f"lat_round_{r}.bench")):
        _, rplat = parse_perftest(os.path.join(out, f"lat_round_{r}.perftest"))
        _, rlat, _ = parse_bench(os.path.join(out, f"lat_round_{r}.bench"))
        rounds.append((rplat, rlat))
        r += 1
    paired = {}  # (path, op) -> median over rounds of (path median / perftest typical)
    main_suffix = "_main_run" if rounds else ""
    csw = extra["csw"]
    print(f"{'latency 8 B (main run)':28} {'median us':>10} {'p99 us':>8} {'csw/op':>7}")
    for op in ("read", "write"):
        if op in plat:
            print(f"{'ib_' + op + '_lat (typical)':28} {plat[op][0]:>10.2f} {plat[op][1]:>8.2f}")
            if REF_FACTOR[op] != 1.0:
                print(f"{'  x2: round trip':28} {ref_lat(plat, op):>10.2f} "
                      f"{plat[op][1] * REF_FACTOR[op]:>8.2f}   (what write ratios use)")
        for path in ("components", "actor", "actor-async", "actor-busy", "actor-busy-async",
                     "direct", "fallback", "fallback-async", "fallback-tls",
                     "fallback-tls-async"):
            if (path, op) in lat:
                m, p = lat[(path, op)]
                sw = f"{csw[(path, op)][0]:.2f}" if (path, op) in csw else "-"
                print(f"{path + ' ' + op:28} {m:>10.2f} {p:>8.2f} {sw:>7}")
                if op in plat:
                    ratios.append((f"{path}_{op}_lat_median_vs_ib_{op}_lat{REF_SUFFIX[op]}"
                                   f"{main_suffix}", m / ref_lat(plat, op)))
    for op in ("read", "write"):
        if ("fallback-tls", op) in lat and ("fallback", op) in lat:
            ratios.append((f"fallback_tls_{op}_lat_median_vs_fallback",
                           lat[("fallback-tls", op)][0] / lat[("fallback", op)][0]))
    if rounds:
        print(f"\nlatency 8 B in {len(rounds)} paired rounds (median us; ratio to perftest "
              f"of the same round: ib_read_lat, and 2 x ib_write_lat for writes)")
        for op in ("read", "write"):
            for path in ("components", "actor", "actor-async", "actor-busy", "actor-busy-async",
                         "direct"):
                cells, rs = [], []
                for rplat, rlat in rounds:
                    if op in rplat and (path, op) in rlat:
                        v, ref = rlat[(path, op)][0], ref_lat(rplat, op)
                        cells.append(f"{v:8.1f}/{ref:6.1f}={v / ref:5.2f}")
                        rs.append(v / ref)
                if rs:
                    med = statistics.median(rs)
                    paired[(path, op)] = med
                    print(f"  {path + ' ' + op:20} " + "  ".join(cells) + f"   median {med:.2f}")
        for (path, op), v in paired.items():
            ratios.append((f"{path}_{op}_lat_median_vs_ib_{op}_lat{REF_SUFFIX[op]}", v))
    # What a message to the manager costs over the direct lane: actor 8 B read / direct 8 B
    # read, per paired round (the main run's when there are no rounds), in the VM.
    # actor-busy: the same with busy polling on the requester's node (ManagerOptions::busy_poll).
    for path, name in (("actor", "actor_read_lat_vs_direct"),
                       ("actor-busy", "actor_busy_read_lat_vs_direct")):
        per_round = [rl[(path, "read")][0] / rl[("direct", "read")][0] for _, rl in rounds
                     if (path, "read") in rl and ("direct", "read") in rl]
        if not per_round and (path, "read") in lat and ("direct", "read") in lat:
            per_round = [lat[(path, "read")][0] / lat[("direct", "read")][0]]
        if per_round:
            ratios.append((name, statistics.median(per_round)))
    ins = os.path.join(out, "instructions.txt")
    if os.path.exists(ins):
        print("\nuser-space instructions per 8-byte op (callgrind, read and write averaged):")
        for line in open(ins):
            p = line.split()
            if len(p) == 3 and p[0] == "instructions":
                print(f"  {p[1]:12} {int(p[2]):>8}")
    ratios += report_striping(out)
    ratios += report_kv_handoff(out, pbw)
    ratios += report_cancel(out)
    ratios += report_load(out)
    ratios += report_native(os.path.join(out, "native"))
    ratios += report_kv(os.path.join(out, "native"))
    if "reg_first_us" in extra:
        print(f"\nregistration of 64 MiB: first {extra['reg_first_us']:.1f} us, "
              f"cached {extra['reg_cached_us']:.3f} us (local keys only)")
        if "reg_handle_us" in extra:
            print(f"per-handle registration (own region for revocation), 64 KiB: "
                  f"{extra['reg_handle_us']:.1f} us for ibv_reg_mr + ibv_dereg_mr")
            ratios.append(("registration_per_handle_64k_us", extra["reg_handle_us"]))
        ratios.append(("registration_first_vs_cached_speedup",
                       extra["reg_first_us"] / max(extra["reg_cached_us"], 1e-3)))
    for k, v in sorted(extra.items()):
        if k.startswith("registered_bytes") or k == "peak_rss_kb":
            print(f"{k} {v}")
    with open(os.path.join(out, "bench.csv"), "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0].keys()) if rows else ["op"])
        w.writeheader()
        w.writerows(rows)
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
        for ax, op in zip(axes, ("write", "read")):
            for key, label in (("perftest_MBps", f"ib_{op}_bw"), ("components_MBps", "components"),
                               ("actor_MBps", "actor"), ("direct_MBps", "direct lanes"),
                               ("fallback_MBps", "fallback"),
                               ("tcp_MBps", "raw TCP loopback")):
                pts = [(r["size"], r[key]) for r in rows if r["op"] == op and r[key]]
                if pts:
                    ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=label)
            ax.set_xscale("log", base=2)
            ax.set_xlabel("message size (bytes)")
            ax.set_ylabel("MB/s")
            ax.set_title(f"RDMA {op.upper()} bandwidth (Soft-RoCE in TCG VM)")
            ax.grid(True, alpha=0.3)
            ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(os.path.join(out, "bench.png"), dpi=110)
        print(f"\nplot: {os.path.join(out, 'bench.png')}  csv: {os.path.join(out, 'bench.csv')}")
    except ImportError:
        print("\n(matplotlib missing: no plot)")
    print()
    for name, value in ratios:
        print(f"ratio {name} {value:.3f}")


if __name__ == "__main__":
    main()
