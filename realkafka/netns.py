"""A network namespace of the harness's own, where nftables cuts and heals the link between two
nodes of a cluster.

    with Network(gids={0: 61000, 1: 61001, ...}) as net:   # the calling thread is now inside
        ...start the JVMs from this thread, each with its node's group id...
        net.cut((1, gid1, port1), (0, gid0, port0)); ...; net.heal(...)

The namespace is unnamed (unshare(CLONE_NEWNET) of the calling thread, not `ip netns add`), so
nothing on the host names it: it lives as long as a thread or process is inside it. The thread
goes back to the host's namespace on exit; the JVMs started from it die with it (PR_SET_PDEATHSIG,
the cluster's); the nft table and the loopback interface go with the namespace. A killed harness
leaves nothing either: its threads are gone, and its JVMs die of PDEATHSIG.

Traffic stays on the namespace's own loopback (127.0.0.1, a port per node). A packet does not say
which node sent it (every node's source address is 127.0.0.1), so each JVM runs with a group id of
its own and the output hook marks each new connection with its opener's group
(`meta skgid G ct mark set G`): a link's rules then match both directions of every connection
the two nodes open to each other's listener (`ct mark A tcp dport B`, `ct mark A tcp sport B`,
and the same with A and B swapped). The harness's own clients and tools run as group 0 and are
never cut: they stand for the operator and the producers, who reach every node.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import subprocess

CLONE_NEWNET = 0x40000000
TABLE = "kafkamc"


class NoNetwork(RuntimeError):
    """The namespace cannot be made here; the message is one line saying why."""


Node = tuple[int, int, int]  # (node id, group id, listener port)


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _run(args: list[str], stdin: str | None = None) -> None:
    p = subprocess.run(args, input=stdin, capture_output=True, text=True)
    if p.returncode != 0:
        raise NoNetwork(f"{' '.join(args[:3])} failed: {(p.stderr or p.stdout).strip().splitlines()[-1:]}")


class Network:
    """The namespace, entered by the thread that enters the `with`."""

    def __init__(self, gids: dict[int, int]):
        self.gids = gids
        self.cuts: set[tuple[Node, Node]] = set()
        self._home: int | None = None

    def __enter__(self) -> Network:
        for tool in ("ip", "nft"):
            if shutil.which(tool) is None:
                raise NoNetwork(f"`{tool}` is not installed (Debian: iproute2, nftables)")
        home = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
        if _libc().unshare(CLONE_NEWNET) != 0:
            os.close(home)
            raise NoNetwork(f"unshare(CLONE_NEWNET): {os.strerror(ctypes.get_errno())} (needs CAP_SYS_ADMIN)")
        self._home = home
        try:
            _run(["ip", "link", "set", "lo", "up"])
            marks = "".join(f"    ct state new meta skgid {g} ct mark set {g}\n" for g in sorted(self.gids.values()))
            hook = "type filter hook output priority 0; policy accept;"
            out = f"  chain out {{ {hook}\n{marks}    jump cuts\n  }}\n"
            rules = f"table inet {TABLE} {{\n{out}  chain cuts {{ }}\n}}\n"
            _run(["nft", "-f", "-"], rules)
        except BaseException:
            self._leave()
            raise
        return self

    def __exit__(self, *_exc: object) -> None:
        self._leave()

    def _leave(self) -> None:
        if self._home is not None:
            _libc().setns(self._home, CLONE_NEWNET)
            os.close(self._home)
            self._home = None

    @staticmethod
    def inode() -> str:
        """The calling thread's network namespace (for tests: a new one inside, the host's after)."""
        return os.readlink("/proc/thread-self/ns/net")

    def cut(self, a: Node, b: Node) -> None:
        """Drop every packet of every connection between a and b, both ways, from now on."""
        self.cuts.add((a, b))
        self._apply()

    def heal(self, a: Node, b: Node) -> None:
        self.cuts -= {(a, b), (b, a)}
        self._apply()

    def _apply(self) -> None:
        lines = [f"flush chain inet {TABLE} cuts"]
        for a, b in sorted(self.cuts):
            for (_x, gx, _px), (_y, _gy, py) in ((a, b), (b, a)):
                lines += [f"add rule inet {TABLE} cuts ct mark {gx} tcp {d} {py} drop" for d in ("dport", "sport")]
        _run(["nft", "-f", "-"], "\n".join(lines) + "\n")
