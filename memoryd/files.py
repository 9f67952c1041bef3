"""Files that appear whole: a reader in another process never sees one half-written."""

from __future__ import annotations

import os
import threading
from pathlib import Path


def path_written_whole(path: Path, text: str, *, replace: bool = True) -> None:
    """`text` appears at `path` complete: written to a draft beside it, then renamed over
    it, or with `replace=False` linked into place unless a file is there already."""
    draft = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}")
    draft.write_text(text)
    try:
        if replace:
            os.replace(draft, path)
        else:
            os.link(draft, path)
    except FileExistsError:
        pass
    finally:
        draft.unlink(missing_ok=True)
