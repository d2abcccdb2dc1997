"""Sums a `strace -f -yy -T [-ttt]` log of pkgproxy (bench/cold_profile.sh trace):
per system call and per kind of descriptor (the client's sockets, the
upstream's, each folder of the cache's files), the calls, the bytes and the
time inside them; and the files created, by folder.
Usage: cold_profile.py TRACE_LOG PKGPROXY_PORT CACHE_DIR"""
import collections
import re
import sys

log, port, cache = sys.argv[1], sys.argv[2], sys.argv[3].rstrip("/")
call = re.compile(r"^(\d+) +(?:\d+\.\d+ +)?(\w+)\((.*)\) += (-?\d+)(?:<([^>]*)>)?(?: .*)?$")
timed = re.compile(r" <(\d+\.\d+)>$")
fd = re.compile(r"^\d+<(.*?)>(?:,|$)")
tcp = re.compile(r"TCPv?6?:\[.*?:(\d+)->")


def kind(target):
    if target.startswith("TCP"):
        found = tcp.match(target)
        return "client socket" if found and found.group(1) == port else "upstream socket"
    if target.startswith(cache + "/"):
        below = target[len(cache) + 1:]
        folder = below.split("/")[0] if "/" in below else below
        if folder == "blobs":
            return "cache blobs/"
        return f"cache {folder}" + ("/" if "/" in below else "")
    if target.startswith(("/", "UNIX", "pipe", "anon_inode")):
        return target.split(":")[0] if not target.startswith("/") else "other file"
    return target


pending = {}
calls = collections.Counter()
bytes_ = collections.Counter()
seconds = collections.Counter()
created = collections.Counter()
for line in open(log):
    line = line.rstrip("\n")
    head = re.match(r"^(\d+) +", line)
    if not head:
        continue
    pid = head.group(1)
    if line.endswith("<unfinished ...>"):
        pending[pid] = line[: -len("<unfinished ...>")].rstrip()
        continue
    resumed = re.match(r"^\d+ +(?:\d+\.\d+ +)?<\.\.\. \w+ resumed>(.*)$", line)
    if resumed:
        line = pending.pop(pid, "") + resumed.group(1)
    took = timed.search(line)
    found = call.match(line[: took.start()] if took else line)
    if not found:
        continue
    _, name, args, ret, opened = found.groups()
    took = took.group(1) if took else None
    ret = int(ret)
    took = float(took or 0)
    if name in ("openat",):
        path = re.search(r'"([^"]*)"', args)
        what = kind(opened or (path.group(1) if path else "?"))
        if "O_CREAT" in args and ret >= 0:
            created[what] += 1
    elif name in ("rename", "renameat", "renameat2", "unlink", "unlinkat", "mkdir", "mkdirat"):
        path = re.findall(r'"([^"]*)"', args)
        what = kind(path[-1]) if path else "?"
    else:
        target = fd.match(args)
        what = kind(target.group(1)) if target else "?"
    key = (name, what)
    calls[key] += 1
    seconds[key] += took
    if ret > 0 and name not in ("openat", "fsync", "fdatasync", "rename", "renameat", "renameat2", "ftruncate",
                                "fallocate", "unlink", "unlinkat", "mkdir", "mkdirat"):
        bytes_[key] += ret

print(f"{'call':<16} {'on':<22} {'calls':>8} {'bytes':>14} {'seconds':>9}")
for key in sorted(calls, key=lambda k: (-calls[k], k)):
    print(f"{key[0]:<16} {key[1]:<22} {calls[key]:>8} {bytes_[key]:>14,} {seconds[key]:>9.3f}")
print("files created (openat with O_CREAT):", ", ".join(f"{w} {n}" for w, n in created.most_common()) or "none")
