"""`memoryd local-llm serve`: a GGUF model over the OpenAI API on loopback, with llama.cpp's
own server embedded in xllamacpp (the `local-llm` extra). Chat completions with JSON-schema
output work through the official openai client, so memoryd talks to it like any endpoint.
"""

from __future__ import annotations

import os
import signal
import socket
import threading
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memoryd.errors import MemorydError


@dataclass(frozen=True)
class ServeOptions:
    model: Path
    name: str  # the model id answers carry, and the one MEMORYD_EXTRACTION_MODEL names
    host: str = "127.0.0.1"
    port: int = 8090
    # Two threads: a batch's prompt is read faster with both cores; with shared cores
    # one keeps workers and the database responsive (OMP_WAIT_POLICY=PASSIVE: no spinning).
    threads: int = 2
    # A batch prompt is up to extract_max_prompt_tokens (6,000) plus its answer.
    context: int = 8192
    parallel: int = 1  # one request at a time: a second would halve both on two cores

    def env(self) -> dict[str, str]:
        """What points memoryd at this server, with the settings a small, slow model
        measures best with (bench/extraction.py): its prompt, the small-model checks, a
        timeout for a batch call of a minute or two, and one call at a time per worker."""
        return {
            "MEMORYD_LLM_BASE_URL": f"http://{self.host}:{self.port}/v1",
            "MEMORYD_EXTRACTION_MODEL": self.name,
            "MEMORYD_EXTRACT_PROMPT": "extract.small.v2",
            "MEMORYD_SMALL_MODEL_CHECKS": "true",
            "MEMORYD_LLM_TIMEOUT_SECONDS": "300",
            "MEMORYD_WORKER_CONCURRENCY": "2",
        }


def start(options: ServeOptions) -> Any:
    """The server, listening. Its threads run until the process ends."""
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    try:
        import xllamacpp
    except ImportError:
        raise MemorydError(
            "memoryd local-llm needs the local-llm extra: pip install 'memoryd[local-llm]'"
        ) from None
    params = xllamacpp.CommonParams()
    params.model.path = str(options.model)
    params.model_alias = {options.name}
    params.n_ctx = options.context
    params.n_parallel = options.parallel
    params.cpuparams.n_threads = options.threads
    params.cpuparams_batch.n_threads = options.threads
    params.hostnames = [options.host]
    params.port = options.port
    params.verbosity = -1  # llama.cpp's per-request log would print what users said
    server = xllamacpp.Server(params)
    wait_ready(f"http://{options.host}:{options.port}/health")
    return server


def wait_ready(health_url: str, timeout: float = 180.0) -> None:
    """Until the model is loaded: llama.cpp's server answers /health with 503 before, and
    a first batch sent then would fail as an outage."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(health_url, timeout=5) as response:
                if response.status == 200:
                    return
        except OSError:  # refused, or 503 (HTTPError is an OSError) while loading
            pass
        if time.monotonic() > deadline:
            raise MemorydError(f"the local model did not get ready within {timeout:.0f} s")
        time.sleep(0.2)


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as probe:
        probe.bind((host, 0))
        port: int = probe.getsockname()[1]
    return port


def serve_forever(options: ServeOptions) -> None:
    """Serve until SIGINT or SIGTERM."""
    server = start(options)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    print(f"serving {options.name} ({options.model}) at {server.listening_address}/v1")
    print("point memoryd at it with:")
    for name, value in options.env().items():
        print(f"  export {name}={value}")
    stop.wait()
