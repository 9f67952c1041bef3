"""`make test`'s step before the suite: the local MiniLM's ONNX export, made now when
this host has none. Made inside the suite instead, the first test to load the model
exports it while the other workers load the cores: more than the 300 s a test may
take, on a slow day. Where the export exists (named by the model's files and the
libraries' releases, recall/onnx_model.py) this costs a second and loads no model.

    python -m testkit.onnx_export
"""

from __future__ import annotations

import importlib.util
import time

from memoryd.recall.embedders import MINILM as MODEL


def main() -> None:
    needed = ("onnxruntime", "sentence_transformers", MODEL.replace("-", "_"))
    if not all(importlib.util.find_spec(m) for m in needed):
        return  # no 'local' extra or no model: the suite skips or keeps torch
    from memoryd.llm.local_model import models_dir
    from memoryd.recall import onnx_model
    from memoryd.recall.embedders import LocalEmbedder, local_model_path
    from memoryd.settings import Settings

    folder, exports = local_model_path(MODEL), models_dir()
    if onnx_model.export_path(MODEL, folder, exports).is_file():
        return
    started = time.perf_counter()
    print(f"exporting {MODEL} to ONNX once for this host, into {exports} ...", flush=True)
    # Where the suite's tests look (models_dir), whatever the environment says.
    settings = Settings(
        embedding_provider="local",
        embedding_model=MODEL,
        embedding_onnx=True,
        embedding_onnx_dir=str(exports),
    )
    if LocalEmbedder(settings.recall).onnx is None:
        print(f"{MODEL} stays on torch here (the suite says why)")
        return
    print(f"exported in {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
