"""What a local model's files are, by their bytes: the name of its ONNX export
(onnx_model.py). The same model installed in another virtualenv (each clean checkout's)
gets the same name, so its export is reused; a model trained again in place, whatever
part of its weights changed, gets a new one.

Hashing a model's weights whole takes about 0.2 s (90 MB, a slow 2-core machine): each
file's hash is kept in a memo beside the exports, keyed by what `stat` says of the file,
so a process pays it once per install, not at every load."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from pathlib import Path

from memoryd.files import path_written_whole

MEMO = "file-hashes.json"


def model_files(folder: Path) -> list[Path]:
    """The model's files, in a stable order: none under a hidden folder or hidden
    itself (a download tool's metadata, a git clone's index, which change on their own)."""
    found = []
    for path in folder.rglob("*"):
        if path.is_file() and not any(p.startswith(".") for p in path.relative_to(folder).parts):
            found.append(path)
    return sorted(found)


def files_digest(folder: Path, memo_dir: Path) -> str:
    """sha256 over each of the model's files: its path in the folder and its bytes' hash."""
    memo = _read_memo(memo_dir)
    digest = hashlib.sha256()
    changed = False
    for file in model_files(folder):
        stat = file.stat()
        key = str(file.resolve())
        # ctime too: a copy that keeps the source's mtime (cp -p) still changes it.
        stamp = [stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns, stat.st_ino]
        known = memo.get(key)
        if not _holds(known, stamp):
            with open(file, "rb") as read:
                memo[key] = [*stamp, hashlib.file_digest(read, "sha256").hexdigest()]
            changed = True
        digest.update(f"{file.relative_to(folder)}:{memo[key][4]}\n".encode())
    if changed:
        _write_memo(memo_dir, memo)
    return digest.hexdigest()


def _holds(entry: object, stamp: list[int]) -> bool:
    """Whether a memo entry is the hash of the file as `stamp` describes it now. Any
    other shape (a hand edit, another release's memo) is hashed again, never trusted."""
    return (
        isinstance(entry, list)
        and len(entry) == 5
        and entry[:4] == stamp
        and isinstance(entry[4], str)
        and len(entry[4]) == 64
    )


def _read_memo(memo_dir: Path) -> dict[str, list[object]]:
    """The memo, or nothing when it is missing or unreadable (each file then hashed)."""
    try:
        found = json.loads((memo_dir / MEMO).read_text())
    except (OSError, ValueError, RecursionError):
        return {}
    return found if isinstance(found, dict) else {}


def _write_memo(memo_dir: Path, memo: dict[str, list[object]]) -> None:
    """Written whole (files.path_written_whole): a reader never sees half of it. Two
    processes writing at once: the last one's stands, the other's files are hashed again
    next time. A folder it cannot write: no memo, nothing else changes. Files gone since
    (an old virtualenv's) leave it."""
    memo = {key: entry for key, entry in memo.items() if os.path.exists(key)}
    with contextlib.suppress(OSError):
        memo_dir.mkdir(parents=True, exist_ok=True)
        path_written_whole(memo_dir / MEMO, json.dumps(memo))
