"""A private etcd cluster of several members: `kubelab up --etcd-members M`, and tests that stop members.

Each member is a `kubelab.etcd.Etcd` (the same launcher, pid file and data-dir checks as the single private
etcd), named `kubelab-<i>` with its data in `<dir>/etcd-<i>`, on loopback client and peer ports of its own;
all are given the whole `--initial-cluster` and one `--initial-cluster-token`, as the compose lab's three
members are (docker-compose.etcd3.yml). Consensus is etcd's own raft: nothing here decides anything.

The members are all launched before any is waited on, since a member answers /health only once a quorum
of members runs and a leader is elected. Their ports are recorded in `<dir>/etcd-cluster.json` at the
first start and reused by a later start on the same directory: a member's data dir remembers its
cluster's peer URLs, and a member started under other ones would not rejoin it.
"""

from __future__ import annotations

import json
import logging
import secrets
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Self

from .etcd import PORT_ATTEMPTS, Etcd, EtcdError, EtcdTLS, PortTaken, free_port

log = logging.getLogger("kubelab.component.etcd")

LAYOUT_FILE = "etcd-cluster.json"


def initial_cluster(members: list[Etcd]) -> str:
    """etcd's --initial-cluster: `name=peer URL`, comma-separated. Pure."""
    return ",".join(f"{m.name}={m.peer_url}" for m in members)


@dataclass
class EtcdCluster:
    directory: Path
    size: int = 3
    tls: EtcdTLS | None = None
    members: list[Etcd] = field(default_factory=list)

    @property
    def urls(self) -> list[str]:
        """The client URLs of every member, for --etcd-servers."""
        return [m.url for m in self.members]

    @property
    def layout_path(self) -> Path:
        return self.directory / LAYOUT_FILE

    def _members(self, ports: list[tuple[int, int]], token: str) -> list[Etcd]:
        members = [Etcd(self.directory / f"etcd-{i}", client_port=client, peer_port=peer, name=f"kubelab-{i}",
                        tls=self.tls, initial_cluster_token=token)
                   for i, (client, peer) in enumerate(ports, start=1)]
        everyone = initial_cluster(members)
        for member in members:
            member.initial_cluster = everyone
        return members

    def start(self, timeout: float = 60.0) -> Self:
        """Launch every member, then wait until each is healthy (a leader elected). A first start whose
        chosen ports were taken meanwhile starts again, afresh, on others."""
        if self.size < 1:
            raise EtcdError("an etcd cluster needs at least one member")
        self.directory.mkdir(parents=True, exist_ok=True)
        try:
            layout = json.loads(self.layout_path.read_text())
            ports = [(int(client), int(peer)) for client, peer in layout["ports"]]
            token = str(layout["token"])
            fresh = False
        except (OSError, ValueError, KeyError, TypeError):
            ports, token, fresh = [], f"kubelab-{secrets.token_hex(4)}", True
        if not fresh and len(ports) != self.size:
            raise EtcdError(f"the etcd cluster in {self.directory} has {len(ports)} members, not {self.size}: "
                            f"start it with --etcd-members {len(ports)}, or use another --data-dir")
        for _ in range(PORT_ATTEMPTS):
            if fresh:
                ports = [(free_port(), free_port()) for _ in range(self.size)]
            self.members = self._members(ports, token)
            try:
                for member in self.members:
                    member.launch()
                for member in self.members:
                    member.wait_healthy(timeout)
            except PortTaken:
                self.stop()
                if not fresh:
                    raise
                for member in self.members:  # a half-formed cluster's data would remember the taken ports
                    shutil.rmtree(member.data_dir, ignore_errors=True)
                continue
            except BaseException:
                self.stop()
                raise
            if fresh:
                tmp = self.layout_path.with_name(LAYOUT_FILE + ".tmp")
                tmp.write_text(json.dumps({"token": token, "ports": [list(p) for p in ports]}) + "\n")
                tmp.replace(self.layout_path)
            return self
        raise EtcdError(f"the etcd cluster did not start in {PORT_ATTEMPTS} attempts; see {self.directory}")

    def stop(self, timeout: float = 10.0) -> None:
        for member in self.members:
            member.stop(timeout)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
