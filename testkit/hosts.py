"""Worker "hosts" of their own on this machine: each a Linux network namespace joined to
the test's own bridge by a veth pair, with its own loopback, address and link, which
the test can cut and restore. The services (PostgreSQL, the broker, the fake LLM) stay
in the machine's namespace and listen on the bridge's address, the gateway, so a
worker in a host reaches them over the virtual network exactly as a worker on another
machine would, and loses them when its link is cut.

A host's clock can run ahead of the machine's, as the Python processes it runs read it
(tests/clock_ahead.py). Needs root and iproute2 (`ip netns`); `unavailable()` says why
not, for a skip. Every
name carries this process's id, so concurrent runs do not meet, and `Network.remove`
(also run at exit) deletes all it made.
"""

from __future__ import annotations

import atexit
import fcntl
import os
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from urllib.parse import urlsplit, urlunsplit

LOOPBACK = "127.0.0.1"
LOCK_FILE = "/tmp/memoryd-hosts.lock"
URL_SETTINGS = ("MEMORYD_DATABASE_URL", "MEMORYD_BROKER_URL", "MEMORYD_LLM_BASE_URL")


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True)


def unavailable() -> str | None:
    """Why hosts cannot be made here, or None when they can."""
    if shutil.which("ip") is None:
        return "network namespaces need iproute2: run `apt-get install iproute2`"
    if os.geteuid() != 0:
        return "network namespaces need root (`ip netns add`)"
    probe = f"mdprobe{os.getpid()}"
    try:
        _ip("netns", "add", probe)
        _ip("netns", "delete", probe)
    except subprocess.CalledProcessError as exc:
        return f"`ip netns add` failed here: {exc.stderr.strip()}"
    return None


@dataclass
class Host:
    """One worker host: a namespace, its address on the bridge, and its link."""

    namespace: str
    address: str
    link: str  # the veth end on the bridge's side; down = the host is cut off
    gateway: str
    clock_ahead_minutes: int = 0  # how far this host's wall clock runs ahead

    def command(self, argv: list[str]) -> list[str]:
        """`argv`, a command `python -m MODULE ...`, run inside this host on its clock."""
        if self.clock_ahead_minutes:
            python, *rest = argv
            argv = [python, "-m", "tests.clock_ahead", str(self.clock_ahead_minutes), *rest]
        return ["ip", "netns", "exec", self.namespace, *argv]

    def environment(self, env: dict[str, str]) -> dict[str, str]:
        """A process's environment with memoryd's service URLs as this host reaches them."""
        return {k: self.reach(v) if k in URL_SETTINGS else v for k, v in env.items()}

    def reach(self, url: str) -> str:
        """`url` as this host reaches it: a service on the machine's loopback at the
        gateway instead."""
        parts = urlsplit(url)
        if parts.hostname != LOOPBACK:
            return url
        return urlunsplit(parts._replace(netloc=parts.netloc.replace(LOOPBACK, self.gateway)))

    def cut(self) -> None:
        """Unplug the host: nothing goes in or out, established connections stall."""
        _ip("link", "set", self.link, "down")

    def restore(self) -> None:
        _ip("link", "set", self.link, "up")


@dataclass
class Network:
    """A bridge in this namespace with the gateway address on it, and the hosts on it."""

    subnet: int = 0  # 10.213.<subnet>.0/24, chosen by start() among those free
    hosts: list[Host] = field(default_factory=list)
    _made: bool = False

    @property
    def bridge(self) -> str:
        return f"mdbr{os.getpid()}"[:15]

    @property
    def gateway(self) -> str:
        """Where services listen for the hosts."""
        return f"10.213.{self.subnet}.1"

    @property
    def cidr(self) -> str:
        return f"10.213.{self.subnet}.0/24"

    def start(self) -> Network:
        remove_orphans()
        _ip("link", "add", self.bridge, "type", "bridge")
        self._made = True
        atexit.register(self.remove)
        # Runs at once (a bench beside the suite) each take a subnet no other one holds:
        # chosen and taken under one lock, since Linux lets two bridges hold one address.
        with open(LOCK_FILE, "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            self.subnet = _free_subnet()
            _ip("addr", "add", f"{self.gateway}/24", "dev", self.bridge)
        _ip("link", "set", self.bridge, "up")
        return self

    def add_host(self) -> Host:
        index = len(self.hosts) + 1
        tag = f"{os.getpid()}h{index}"
        address = f"10.213.{self.subnet}.{index + 1}"
        host = Host(f"md{tag}", address, f"mdv{tag}"[:15], self.gateway)
        inside = f"mdp{tag}"[:15]
        _ip("netns", "add", host.namespace)
        self.hosts.append(host)
        _ip("link", "add", host.link, "type", "veth", "peer", "name", inside)
        _ip("link", "set", inside, "netns", host.namespace)
        _ip("link", "set", host.link, "master", self.bridge, "up")
        for args in (
            ("link", "set", "lo", "up"),
            ("addr", "add", f"{host.address}/24", "dev", inside),
            ("link", "set", inside, "up"),
            ("route", "add", "default", "via", self.gateway),
        ):
            _ip("-n", host.namespace, *args)
        return host

    def remove(self) -> None:
        for host in self.hosts:
            subprocess.run(["ip", "netns", "delete", host.namespace], capture_output=True)
            subprocess.run(["ip", "link", "delete", host.link], capture_output=True)
        self.hosts.clear()
        if self._made:
            subprocess.run(["ip", "link", "delete", self.bridge], capture_output=True)
            self._made = False


def _free_subnet() -> int:
    """The first 10.213.N.0/24 (from one this process's id picks) no interface is on."""
    shown = subprocess.run(["ip", "-o", "-4", "addr", "show"], capture_output=True, text=True)
    taken = {int(n) for n in re.findall(r"inet 10\.213\.(\d+)\.", shown.stdout)}
    start = os.getpid() % 250
    for offset in range(250):
        subnet = (start + offset) % 250 + 1
        if subnet not in taken:
            return subnet
    raise RuntimeError("every 10.213.N.0/24 subnet is taken: remove the bridges left behind")


def remove_orphans() -> None:
    """Delete the hosts and bridges of runs that were killed before they could (their
    process is gone): left behind, a bridge would hold its gateway's address."""
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
    for name in re.findall(r"^(md\d+h\d+)\b", listed, re.M):
        if not _running(name):
            subprocess.run(["ip", "netns", "delete", name], capture_output=True)
    for name in re.findall(r"^\d+: (md(?:br|v)\d+(?:h\d+)?)[:@]", links, re.M):
        if not _running(name):
            subprocess.run(["ip", "link", "delete", name], capture_output=True)


def _running(name: str) -> bool:
    """Whether the process whose id a host's or bridge's name carries is alive."""
    pid = int(re.findall(r"\d+", name)[0])
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True
