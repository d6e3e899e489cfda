"""Network partitions between members on loopback: an nftables table of hwm's own per run.

Every member has its own loopback address, but the connections it opens leave from 127.0.0.1, so an
address alone does not say which member sent a packet. Each member therefore runs under a user id of
its own (`member_uid`), and the table marks every connection at its first packet with the uid of
the member that opened it (conntrack keeps the mark for both directions). A partition is then one
rule per pair of members on different sides: drop the packets, both ways, of every connection that
member i opened to member j's address. hwm's own clients (root, mark 0) are never cut off: a
partition is between the members.

The table is `inet hwm_<pid>` (the pid of the run that made it). It is removed when the run ends,
whatever ends it; a run killed with SIGKILL leaves it behind, and the next run removes every
`hwm_<pid>` table whose process is gone (`remove_stale_tables`), naming it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess

from hwm.bridge.servers.adapter import ServerError

TABLE_PREFIX = "hwm_"
UID_BASE = 47000  # member i runs as uid UID_BASE + i (no account needed)


def member_uid(index: int) -> int:
    return UID_BASE + index


def available() -> str | None:
    """None when partitions can be made here, else why not (one line)."""
    if os.geteuid() != 0:
        return "partitions need root (hwm adds an nftables table and runs each member under its own uid)"
    if shutil.which("nft") is None:
        return "partitions need the nft command (Debian package nftables)"
    return None


def _nft(script: str) -> None:
    done = subprocess.run(["nft", "-f", "-"], input=script, text=True, capture_output=True, timeout=10)
    if done.returncode != 0:
        raise ServerError(f"nft refused the partition rules: {done.stderr.strip().splitlines()[-1:] or done.returncode}")


def _owner_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def remove_stale_tables() -> list[str]:
    """Delete every hwm_<pid> table whose run is gone; the names of those deleted."""
    if available() is not None:
        return []
    done = subprocess.run(["nft", "-j", "list", "tables"], capture_output=True, text=True, timeout=10)
    if done.returncode != 0:
        return []
    removed = []
    for item in json.loads(done.stdout or "{}").get("nftables", []):
        table = item.get("table")
        if not table or not table.get("name", "").startswith(TABLE_PREFIX):
            continue
        pid = table["name"][len(TABLE_PREFIX):]
        if pid.isdigit() and int(pid) != os.getpid() and not _owner_alive(int(pid)):
            name = f"{table['family']} {table['name']}"
            if subprocess.run(["nft", "delete", "table", table["family"], table["name"]],
                              capture_output=True, timeout=10).returncode == 0:
                removed.append(name)
    return removed


class Partitions:
    """The run's table: created before any member starts (a connection is marked at its first packet)."""

    def __init__(self, members):
        self.members = list(members)
        self.table = f"{TABLE_PREFIX}{os.getpid()}"
        self.made = False

    def create(self) -> None:
        marks = "\n".join(f"    ct state new meta skuid {member_uid(m.index)} ct mark set {member_uid(m.index)}"
                          for m in self.members)
        _nft(f"table inet {self.table} {{\n  chain cut {{\n  }}\n"
             f"  chain out {{\n    type filter hook output priority 0; policy accept;\n{marks}\n    jump cut\n  }}\n}}\n")
        self.made = True

    def partition(self, groups: list[list[str]]) -> None:
        """Cut every member off from those on other sides; a member in no group is a side of its own."""
        side = {name: k for k, group in enumerate(groups) for name in group}
        rules = []
        for a in self.members:
            for b in self.members:
                if a is not b and side.get(a.name, -1 - a.index) != side.get(b.name, -1 - b.index):
                    rules.append(f"add rule inet {self.table} cut ct mark {member_uid(a.index)} "
                                 f"ct original ip daddr {b.address} drop")
        _nft("\n".join([f"flush chain inet {self.table} cut", *rules]) + "\n")

    def heal(self) -> None:
        _nft(f"flush chain inet {self.table} cut\n")

    def remove(self) -> None:
        if self.made:
            subprocess.run(["nft", "delete", "table", "inet", self.table], capture_output=True, timeout=10)
            self.made = False
