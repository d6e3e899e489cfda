import shutil

import pytest

from hwm.bridge.servers import netfilter


def needs_etcd():
    """Skip where Debian's etcd-server is not installed (.ci/run installs it)."""
    if shutil.which("etcd") is None:
        pytest.skip("etcd is not installed (apt-get install etcd-server etcd-client; .ci/run does)")


def needs_partitions():
    why = netfilter.available()
    if why is not None:
        pytest.skip(why)


def tables() -> set[str]:
    """The nftables tables now, as 'family name'."""
    import json
    import subprocess
    done = subprocess.run(["nft", "-j", "list", "tables"], capture_output=True, text=True, check=True)
    return {f"{t['table']['family']} {t['table']['name']}" for t in json.loads(done.stdout)["nftables"] if "table" in t}


def group_running(pgid: int) -> bool:
    from hwm.bridge.maelstrom.process import _group_running
    return _group_running(pgid)
