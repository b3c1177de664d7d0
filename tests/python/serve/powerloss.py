"""A power cut replayed from the journal of the file-system shim (tests/serve/fs_shim.cpp), for
reliability case T19.

After the shim SIGKILLs a server, the kernel still holds everything the server wrote, so the
directory looks as if nothing was lost. `power_cut` copies it and takes away, in the copy, what a
power cut may take away:
- data written to a file since that file's last fsync: kept, cut off at its first unsynced byte,
  zeroed, or replaced by random bytes (drawn per file);
- directory entries created, renamed or removed since their directory's last fsync: a random
  suffix of those changes is undone, newest first (file systems journal metadata in order, so
  what survives is a prefix of what happened).
A change is durable once every directory it touches has been fsynced after it; a file's data once
the file has been fsynced after it. The shim keeps the file a rename replaced, or an unlink
removed, as a hard link in its save folder, so those changes can be undone exactly."""
import os
import shutil

INF = 1 << 62


def read_journal(path):
    """The shim's lines, split into fields, up to (not including) the crash line."""
    ops = []
    if not os.path.exists(path):
        return ops
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            fields = line.rstrip("\n").split("\t")
            if fields[0] == "crash":
                break
            ops.append(fields)
    return ops


def crash_point(path):
    """(n, call, path) of the shim's crash line, or None when the process was not stopped by it."""
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            fields = line.rstrip("\n").split("\t")
            if fields[0] == "crash":
                return int(fields[1]), fields[2], fields[3]
    return None


def _parent(p):
    return os.path.dirname(p.rstrip("/"))


def _pending(ops):
    """(unsynced data ranges per inode, directory changes not yet durable, in order)."""
    data = {}
    changes = []  # [fields, dirs touched, dirs fsynced since]
    for f in ops:
        kind = f[0]
        if kind == "write":
            off, n = int(f[2]), int(f[3])
            data.setdefault(f[1], []).append((off, off + n))
        elif kind == "trunc":
            data.setdefault(f[1], []).append((int(f[2]), INF))
        elif kind == "fsync":
            data.pop(f[1], None)
        elif kind == "dsync":
            for c in changes:
                if f[1] in c[1]:
                    c[2].add(f[1])
        elif kind in ("create", "link"):
            changes.append([f, {_parent(f[2])}, set()])
        elif kind == "rename":
            changes.append([f, {_parent(f[2]), _parent(f[3])}, set()])
        elif kind == "unlink":
            changes.append([f, {_parent(f[2])}, set()])
        elif kind in ("mkdir", "rmdir"):
            changes.append([f, {_parent(f[1])}, set()])
    return data, [c[0] for c in changes if not c[1] <= c[2]]


def _files_by_inode(folders):
    """inode (as the journal writes it) -> every path naming it under the given folders."""
    out = {}
    for top in folders:
        for dirpath, _, names in os.walk(top):
            for name in names:
                p = os.path.join(dirpath, name)
                out.setdefault(str(os.lstat(p).st_ino), []).append(p)
    return out


def _damage(path, ranges, mode, rng):
    size = os.path.getsize(path)
    if mode == "cut":
        low = min(a for a, _ in ranges)
        if low < size:
            os.truncate(path, low)
        return
    with open(path, "r+b") as f:
        for a, b in ranges:
            b = min(b, size)
            if a >= b:
                continue
            f.seek(a)
            f.write(bytes(b - a) if mode == "zero" else rng.randbytes(b - a))


def power_cut(root, save, journal, out, rng):
    """Copies `root` (and the shim's `save` folder) under `out` and applies one random power cut
    to the copy. Returns (the copy of root, a one-line description of what was taken away)."""
    ops = read_journal(journal)
    data, undo_candidates = _pending(ops)
    out_root, out_save = os.path.join(out, "root"), os.path.join(out, "save")
    if os.path.isdir(root):
        shutil.copytree(root, out_root)
    else:
        os.makedirs(out_root)  # the crash came before the directory was made
    if os.path.isdir(save):
        shutil.copytree(save, out_save)
    else:
        os.makedirs(out_save)

    def copy_of(p):
        for a, b in ((root, out_root), (save, out_save)):
            if p == a or p.startswith(a + "/"):
                return b + p[len(a):]
        raise AssertionError("path outside the shim's folders: " + p)

    inodes = _files_by_inode([root, save])
    said = []
    for ino, ranges in sorted(data.items()):
        paths = inodes.get(ino)
        if not paths:
            continue  # removed for good before the cut
        mode = rng.choice(["kept", "cut", "zero", "random"])
        if mode != "kept":
            for p in paths:
                _damage(copy_of(p), ranges, mode, rng)
        said.append(f"{os.path.basename(paths[0])}:{mode}")

    # What each name held at the crash, then the undone changes newest first.
    names = {p: ino for ino, ps in inodes.items() for p in ps if p.startswith(root + "/")}
    keep = rng.randint(0, len(undo_candidates))
    for f in reversed(undo_candidates[keep:]):
        kind = f[0]
        if kind in ("create", "link"):
            if names.get(f[2]) == f[1]:
                os.unlink(copy_of(f[2]))
                del names[f[2]]
        elif kind == "rename":
            ino, a, b, saved = f[1], f[2], f[3], f[4]
            if names.get(b) == ino:
                os.replace(copy_of(b), copy_of(a))
                names[a] = ino
                del names[b]
                if saved != "-":
                    shutil.copyfile(copy_of(saved), copy_of(b))
                    names[b] = str(os.lstat(saved).st_ino)
        elif kind == "unlink":
            ino, p, saved = f[1], f[2], f[3]
            if saved != "-" and p not in names:
                shutil.copyfile(copy_of(saved), copy_of(p))
                names[p] = ino
        elif kind == "mkdir":
            try:
                os.rmdir(copy_of(f[1]))
            except OSError:
                pass  # not empty: the entries inside it were kept
        elif kind == "rmdir":
            os.makedirs(copy_of(f[1]), exist_ok=True)
        said.append(f"undo {kind} {os.path.basename(f[-2] if kind in ('rename', 'unlink') else f[-1])}")
    return out_root, f"{len(undo_candidates) - keep} of {len(undo_candidates)} undone; " + ", ".join(said)
