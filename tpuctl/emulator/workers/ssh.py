"""Every worker of every READY emulated node is an SSH host (asyncssh).

One asyncio event loop in a background thread serves them all: a server per worker,
bound to the worker's own loopback address on the emulator's SSH port. The servers
follow the backend's state through a listener the backend calls, under its lock, after
every change: a node that becomes READY gets its servers, one that stops, is preempted
or deleted loses them (and its workers' processes are killed); a deleted node's folders
go too. The loop thread never takes the backend's lock, so waiting on it from under the
lock cannot deadlock: what the servers need (authorized keys, environment) is handed
over as plain data.
"""

from __future__ import annotations

import asyncio
import functools
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

import asyncssh

from tpuctl.emulator.core.ports import free_port
from tpuctl.emulator.core.state import State
from tpuctl.emulator.iam.oslogin import Login
from tpuctl.emulator.tpu.models import HOSTKEYS_NAMESPACE, Node
from tpuctl.emulator.workers.files import WorkerFiles
from tpuctl.emulator.workers.sessions import HomeSftp, Session

APPLY_TIMEOUT = 30.0


class Backend(Protocol):
    """What the SSH servers read of the backend (`services.Backend`, which starts them
    through `workers/service.py`): the nodes and Compute Engine VMs, their logins and
    environments, under the lock; they follow its changes and tell it their port."""

    lock: Any  # a threading.RLock
    state: State
    workers: WorkerFiles
    ssh_port: int | None

    @property
    def nodes(self) -> dict[str, Node]: ...
    @property
    def compute_hosts(self) -> list[Any]: ...
    def logins(self, node: Any) -> frozenset[Login]: ...
    def node_env(self, node: Any, worker: int) -> dict[str, str]: ...
    def publish(self, node: Node, worker: int, items: list[dict[str, str]]) -> None: ...
    def follow(self, listener: Callable[[], None]) -> None: ...
    def unfollow(self, listener: Callable[[], None]) -> None: ...


@dataclass
class Worker:
    """One worker's server: what it serves and what it has running."""

    node: str
    uid: str
    index: int
    address: str
    host_keys: list[asyncssh.SSHKey]
    home: str
    env: dict[str, str]
    keys: frozenset[Login] = frozenset()  # who may log in with which key (oslogin.logins)
    acceptor: Any = None
    connections: set[Any] = field(default_factory=set)
    pids: set[int] = field(default_factory=set)
    down: bool = False

    def track(self, pid: int, alive: bool) -> bool:
        if alive:
            self.pids.add(pid)
        else:
            self.pids.discard(pid)
        return not self.down


# SSH connections accepted by every worker of this process, ever (tests prove "no SSH" by it)
CONNECTIONS = [0]


class _Server(asyncssh.SSHServer):
    def __init__(self, worker: Worker, clock: Callable[[], float] = time.time) -> None:
        self.worker = worker
        self.clock = clock
        self.conn: asyncssh.SSHServerConnection | None = None

    def connection_made(self, conn: asyncssh.SSHServerConnection) -> None:
        self.conn = conn
        self.worker.connections.add(conn)
        CONNECTIONS[0] += 1

    def connection_lost(self, exc: Exception | None) -> None:
        self.worker.connections.discard(self.conn)

    def begin_auth(self, username: str) -> bool:
        return True

    def public_key_auth_supported(self) -> bool:
        return True

    def validate_public_key(self, username: str, key: asyncssh.SSHKey) -> bool:
        # The keys are read when tried, so a key added to the metadata (or imported into
        # an OS Login profile) works at once, and one past its expiry no longer does.
        now_usec = int(self.clock() * 1_000_000)
        return any(
            user == username and blob == key.public_data and (expires is None or expires > now_usec)
            for user, blob, expires in self.worker.keys
        )

    def connection_requested(self, *args: Any) -> bool:
        return True  # `ssh -L`: the worker's localhost is this machine's


class SshWorkers:
    """Serves SSH on every worker of every READY node of `backend`."""

    def __init__(self, backend: Backend, port: int | None = None) -> None:
        self.backend = backend
        self.port = port or free_port()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="tpuctl-emulator-ssh", daemon=True
        )
        self._workers: dict[tuple[str, int], Worker] = {}  # (node uid, index) -> worker
        self._host_keys: dict[tuple[str, int], list[asyncssh.SSHKey]] = {}
        self._node_dirs: dict[str, str] = {}  # node uid -> its folder's name
        # (node uid, worker) whose processes got a preemption's notice
        self._noticed: set[tuple[str, int]] = set()
        self._syncing = False

    # -- life ---------------------------------------------------------------------
    def start(self) -> SshWorkers:
        self._thread.start()
        backend = self.backend
        with backend.lock:
            backend.ssh_port = self.port
            self._node_dirs = {}
            known = {backend.workers.node_dir(n).name for n in backend.nodes.values()}
            for orphan in backend.workers.node_dir_names() - known:
                backend.workers.remove_node(orphan)  # nodes deleted while it was down
            backend.follow(self.sync)
        return self

    def stop(self) -> None:
        with self.backend.lock:
            self.backend.unfollow(self.sync)
            workers, self._workers = list(self._workers.values()), {}
            self.backend.ssh_port = None
        if self._thread.is_alive():
            self._run(self._stop_all(workers))
            self.backend.workers.kill()
            self._run(self._drain())
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=10)
        self.backend.workers.kill()
        self._loop.close()

    def _run(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(APPLY_TIMEOUT)

    # -- following the backend -------------------------------------------------------
    def sync(self) -> None:
        """Bring the servers in line with the nodes (called under the backend's lock)."""
        if self._syncing:
            return
        self._syncing = True
        try:
            self._sync()
        finally:
            self._syncing = False

    def _sync(self) -> None:
        backend = self.backend
        # TPU API nodes, then Compute Engine's VMs and slices (compute/hosts.py)
        nodes: list[Any] = [*backend.nodes.values(), *backend.compute_hosts]
        by_name = {node.name: node for node in nodes}
        for node in nodes:
            if node.uid not in self._node_dirs:
                self._prepare(node)
        # each worker whose VM runs (a VM of a Compute Engine slice runs on when another
        # is preempted: compute/hosts.py)
        wanted: dict[tuple[str, int], tuple[Node, int]] = {
            (node.uid, k): (node, k) for node in nodes for k in node.serving()
        }
        keys = {node.uid: backend.logins(node) for node in nodes}
        for (uid, _), worker in self._workers.items():
            worker.keys = keys.get(uid, frozenset())
        gone = [w for key, w in self._workers.items() if key not in wanted]
        new = []
        for key, (node, k) in wanted.items():
            if key not in self._workers:
                env = backend.node_env(node, k)
                new.append(
                    Worker(
                        node.name,
                        node.uid,
                        k,
                        node.addresses[k],
                        self._host_keys[key],
                        env["HOME"],
                        env,
                        keys[node.uid],
                    )
                )
        for worker in gone:
            del self._workers[(worker.uid, worker.index)]
        for worker in new:
            self._workers[(worker.uid, worker.index)] = worker
        if gone or new:
            self._run(self._apply(new, gone))
        for worker in new:  # booted: the guest runs the node's startup script
            backend.workers.run_startup_script(by_name[worker.node], worker.index, worker.env)
        for worker in gone:
            backend.workers.kill(worker.uid, worker.index)
        for node in nodes:  # a preemption's notice: the guest shuts down (ACPI -> SIGTERM)
            for k in _noticed_workers(node):
                if (node.uid, k) not in self._noticed:
                    self._noticed.add((node.uid, k))
                    backend.workers.kill(node.uid, k, sig=signal.SIGTERM)
        live = {node.uid for node in nodes}
        # a worker noticed no more (its VM back after a maintenance) may be noticed again
        self._noticed &= {(node.uid, k) for node in nodes for k in _noticed_workers(node)}
        for uid in [uid for uid in self._node_dirs if uid not in live]:
            backend.workers.kill(uid)
            backend.workers.remove_node(self._node_dirs.pop(uid))
            for key in [key for key in self._host_keys if key[0] == uid]:
                del self._host_keys[key]

    def _prepare(self, node: Node) -> None:
        """A node seen for the first time: its folders and host keys, published as the
        cloud publishes them (guest attributes `hostkeys/ssh-ed25519`, `hostkeys/ssh-rsa`,
        `hostkeys/ecdsa-sha2-nistp256`)."""
        files = self.backend.workers
        self._node_dirs[node.uid] = files.node_dir(node).name
        for k in range(len(node.addresses)):
            keys = {a: _host_key(p) for a, p in files.prepare(node, k).items()}
            self._host_keys[(node.uid, k)] = list(keys.values())
            items = [
                {
                    "namespace": HOSTKEYS_NAMESPACE,
                    "key": algorithm,
                    "value": key.export_public_key("openssh").split()[1].decode(),
                }
                for algorithm, key in keys.items()
            ]
            # Published now, shown from `hostkeys_at` on: a little after the node is READY.
            self.backend.publish(node, k, items)

    # -- on the loop -------------------------------------------------------------------
    async def _apply(self, new: Iterable[Worker], gone: Iterable[Worker]) -> None:
        await self._stop_all(gone)
        for worker in new:
            await self._listen(worker)

    async def _listen(self, worker: Worker) -> None:
        sandbox = self.backend.workers.sandbox
        confined = not (sandbox.unconfined and not sandbox.confined)

        async def process(proc: asyncssh.SSHServerProcess) -> None:
            if worker.down:
                proc.exit(255)
                return
            await Session(proc, worker.home, worker.env, worker.track, sandbox).run()

        try:
            worker.acceptor = await asyncssh.listen(
                worker.address,
                self.port,
                server_factory=lambda: _Server(worker, self.backend.state.clock),
                server_host_keys=worker.host_keys,
                process_factory=process,
                sftp_factory=lambda chan: HomeSftp(chan, worker.home, confined),
                allow_scp=True,
                encoding=None,
                line_editor=False,
                agent_forwarding=False,
                x11_forwarding=False,
                reuse_address=True,
            )
        except OSError as exc:  # e.g. no such loopback address outside Linux
            print(
                f"tpuctl emulator: worker {worker.index} of {worker.node}: cannot serve SSH "
                f"on {worker.address}:{self.port}: {exc}",
                file=sys.stderr,
            )

    async def _stop_all(self, workers: Iterable[Worker]) -> None:
        closing = []
        for worker in workers:
            worker.down = True
            if worker.acceptor is not None:
                worker.acceptor.close()
                closing.append(worker.acceptor.wait_closed())
            for conn in list(worker.connections):
                conn.abort()
            worker.connections.clear()
        if closing:
            await asyncio.wait_for(asyncio.gather(*closing, return_exceptions=True), 5)

    async def _drain(self) -> None:
        """Let the sessions whose processes were killed finish; cancel what lingers."""
        tasks = asyncio.all_tasks() - {asyncio.current_task()}
        if tasks:
            _, pending = await asyncio.wait(tasks, timeout=2)
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)


def _noticed_workers(node: Any) -> list[int]:
    """The workers of a node whose VM is in a preemption's notice: every worker of a TPU
    API node (preempted whole), the one VM of a Compute Engine slice (hosts.py)."""
    if node.transition == "preempt":
        return list(range(len(node.addresses)))
    # ... or being shut down for a host maintenance (tpu/ and compute/maintenance.py)
    return [*getattr(node, "preempting", ()), *getattr(node, "shutting_down", ())]


@functools.lru_cache(maxsize=8)
def _host_key(text: str) -> asyncssh.SSHKey:
    """A host key, imported once: the RSA key is one for every worker (files.py), and
    importing it checks the key, about 48 ms of CPU each time (3% of the CPU of the
    suite's run tests, by py-spy)."""
    return asyncssh.import_private_key(text)
