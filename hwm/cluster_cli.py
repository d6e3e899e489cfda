"""`hwm node`, `hwm cluster`, `hwm put`, `hwm get`, `hwm status`: run and use a real cluster.

Which cluster put/get/status talk to, first match wins:
  --cluster S1=HOST:PORT,...   (or the HWM_CLUSTER environment variable)
  --data DIR                   the directory given to `hwm cluster`: reads DIR/cluster.json
  ./hwm-data/cluster.json      the default directory of `hwm cluster`

Exit status: 0 done; 1 the cluster could not do it (no leader reachable, not committed, a node that
cannot start ...), with a message naming the addresses tried; 2 bad arguments.
"""

from __future__ import annotations

import asyncio
import json
import logging
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import click

from hwm.params import OutputDir, OutputFile, ProtocolParam, spec_text
from hwm.properties.protocol import resolve
from hwm.impl.client import (
    Client,
    ClientError,
    NotCommittedError,
    format_address,
    parse_address,
    parse_cluster,
)

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
DEFAULT_DATA = Path("hwm-data")
CLUSTER_FILE = "cluster.json"
CLUSTER_FORMAT = "hwm-cluster/1"


# ------------------------------------------------------------------------- parameters
# `--protocol` takes `hwm check`'s syntax (preset[,flag=value...]), parsed once by ProtocolParam; the
# node and the controller run the resolved protocol, `hwm cluster` passes the spec's text on.
RUNTIME_PROTOCOL = ProtocolParam(runtime=True)


def _resolved(ctx: click.Context, param: click.Parameter, spec):
    return resolve(spec)[1]


def _address(ctx, param, value):
    if value is None:
        return None
    try:
        return parse_address(value, param.opts[0])
    except ValueError as error:
        raise click.BadParameter(str(error).removeprefix(f"{param.opts[0]}: ")) from None


def _peers(ctx, param, value):
    if not value:
        return {}
    try:
        return parse_cluster(value, "--peers")
    except ValueError as error:
        raise click.BadParameter(str(error).removeprefix("--peers: ")) from None


def _cluster_servers(cluster: str | None, data: Path | None) -> dict[str, tuple[str, int]]:
    """The cluster to talk to (see the module docstring); UsageError if none can be found."""
    if cluster:
        try:
            return parse_cluster(cluster)
        except ValueError as error:
            raise click.BadParameter(str(error).removeprefix("--cluster: "), param_hint="--cluster") from None
    path = (data if data is not None else DEFAULT_DATA) / CLUSTER_FILE
    if not path.exists():
        where = f"--data {data}: no {path}" if data is not None else f"no {path} in the current directory"
        raise click.UsageError(f"which cluster? {where}; give --cluster S1=HOST:PORT,... or --data DIR "
                               "(the directory given to `hwm cluster`)")
    return read_cluster_file(path)


def read_cluster_file(path: Path) -> dict[str, tuple[str, int]]:
    try:
        document = json.loads(path.read_text())
        if document.get("format") != CLUSTER_FORMAT:
            raise ValueError(f"format is {document.get('format')!r}, expected {CLUSTER_FORMAT!r}")
        return {server: parse_address(address, f"servers.{server}") for server, address in document["servers"].items()}
    except (OSError, ValueError, KeyError, AttributeError, TypeError) as error:
        raise click.UsageError(f"{path}: not a cluster file written by `hwm cluster` ({error})") from None


def _cluster_options(function):
    function = click.option("--timeout", type=click.FloatRange(0.1, 3600), default=10.0, show_default=True,
                            help="Seconds to wait for a leader (and for a put to commit).")(function)
    function = click.option("--data", type=click.Path(file_okay=False, path_type=Path), default=None,
                            help=f"Directory of `hwm cluster`: use its {CLUSTER_FILE} [default: ./{DEFAULT_DATA}].")(function)
    function = click.option("--cluster", envvar="HWM_CLUSTER", default=None, metavar="S1=HOST:PORT,...",
                            help="The servers (or the HWM_CLUSTER environment variable).")(function)
    return function


def _fail(message: str) -> None:
    click.echo(f"error: {message}", err=True)
    sys.exit(EXIT_FAILED)


def _show_value(value: bytes) -> str:
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        return repr(value)


# ------------------------------------------------------------------------------ node
@click.command()
@click.option("--id", "server_id", default=None, help="This server's id, e.g. S1 (not with --stdio).")
@click.option("--listen", default=None, callback=_address, metavar="HOST:PORT",
              help="Address for peers and clients (not with --stdio).")
@click.option("--peers", default="", callback=_peers, metavar="S2=HOST:PORT,...",
              help="The other servers [default: none, a cluster of one].")
@click.option("--data", default=None, type=OutputDir(),
              help="Directory of this server's write-ahead log and metadata (created if missing). With "
                   "--stdio: init's hwm_data_dir, else $HWM_DATA_DIR, else the current directory.")
@click.option("--protocol", default="raft", show_default=True, type=RUNTIME_PROTOCOL, callback=_resolved,
              help="Preset, optionally with flags: raft,noop_on_election=true (see `hwm protocols`).")
@click.option("--tick-ms", type=click.FloatRange(1, 1000), default=10.0, show_default=True,
              help="Length of one tick; elections time out after 30-60 ticks, heartbeats every 5.")
@click.option("--controller", callback=_address, default=None, metavar="HOST:PORT",
              help="Kafka only: where the partition's controller (`hwm controller`) listens.")
@click.option("--quiet", "-q", is_flag=True, help="Only warnings and errors on stderr.")
@click.option("--record", type=OutputFile(create_parent=True), default=None,
              help="Record this server's part of the run as hwm-events/1 lines in FILE (for `hwm validate`); "
                   "a restart on the same FILE records the crash and the restart.")
@click.option("--stdio", is_flag=True,
              help="Speak Maelstrom's protocol (JSON lines) on stdin/stdout instead of TCP: the process that "
                   "starts the node is its network (hwm test, Maelstrom). See docs/cluster.md.")
@click.option("--clock", type=click.Choice(["real", "virtual"]), default="real", show_default=True,
              help="With --stdio: virtual uses no timers, only hwm_tick messages (also after the first one).")
@click.option("--ledger", type=OutputFile(), default=None,
              help="BookKeeper only: the ledger's metadata file, where recovery records the close (hwm cluster: "
                   "DIR/ledger.json); a bookie reads it when it starts.")
def node(server_id, listen, peers, data, protocol, tick_ms, controller, quiet, stdio, clock, record=None,
         ledger=None) -> None:
    """Run one server of a replicated log until SIGTERM or Ctrl-C.

    Exit status: 0 after a clean stop (with --stdio: also when stdin ends); 1
    when it cannot start (a damaged write-ahead log, a taken port) or had to stop
    (storage failure: a full disk, a failed fsync); 2 on bad arguments, a data
    directory another server holds, or a variant's rule that raised (one line
    naming the variant, the rule and the exception); 130 on Ctrl-C with --stdio.
    """
    from hwm.impl.runtime import NodeConfig, Node

    if protocol.system == "bookkeeper":
        _bookie(server_id, listen, peers, data, controller, quiet, stdio, record, ledger)
        return
    if ledger is not None:
        raise click.UsageError("--ledger is for BookKeeper's bookies (--protocol bookkeeper)")
    if stdio:
        from hwm.stdio_cli import run_stdio_node

        sys.exit(run_stdio_node(locals()))
    for name, value in (("--id", server_id), ("--listen", listen), ("--data", data)):
        if value is None:
            raise click.UsageError(f"Missing option '{name}' (required unless --stdio).")

    try:
        config = NodeConfig(server_id, listen, peers, str(data), protocol, tick_seconds=tick_ms / 1000,
                            controller=controller, record=None if record is None else str(record))
    except ValueError as error:
        raise click.UsageError(str(error)) from None
    if listen in peers.values() or listen == controller:
        raise click.BadParameter(f"{format_address(listen)} is also a peer's address", param_hint="--listen")
    _log_to_stderr(quiet)

    async def serve() -> Node:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, stop.set)
        node = Node(config)
        await node.start()
        # kill -USR1 logs what the node is doing (role, generation, indexes, appends in flight).
        loop.add_signal_handler(signal.SIGUSR1, node.log_state)
        waiter = asyncio.create_task(node.stopped())
        stopper = asyncio.create_task(stop.wait())
        await asyncio.wait([waiter, stopper], return_when=asyncio.FIRST_COMPLETED)
        waiter.cancel()
        stopper.cancel()
        await node.stop()
        return node

    _serve_until_stopped(serve, server_id)
    logging.getLogger("hwm.node").info("%s: stopped", server_id)


def _bookie(server_id, listen, peers, data, controller, quiet, stdio, record, ledger) -> None:
    """`hwm node --protocol bookkeeper`: one bookie (impl/bookie_server.py) until SIGTERM or Ctrl-C."""
    from hwm.impl.bookie_server import BookieServer
    from hwm.impl.runtime import NodeError

    if stdio:
        raise click.UsageError("--stdio runs the raft family's, ZAB's and Kafka's replicas; BookKeeper's bookies "
                               "run on the TCP runtime only")
    for name, value in (("--id", server_id), ("--listen", listen), ("--data", data)):
        if value is None:
            raise click.UsageError(f"Missing option '{name}'.")
    for name, value in (("--peers", peers), ("--controller", controller), ("--record", record)):
        if value:
            raise click.UsageError(f"{name} is not for a bookie: bookies do not talk to each other, the ledger's "
                                   f"writer and recovery client talk to them")
    _log_to_stderr(quiet)

    async def serve() -> BookieServer:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, stop.set)
        bookie = BookieServer(server_id, listen, str(data), None if ledger is None else str(ledger))
        try:
            await bookie.start()
        except OSError as error:  # a taken port, a damaged journal
            raise NodeError(f"{server_id} cannot start: {error}") from None
        waiter = asyncio.create_task(bookie.stopped())
        stopper = asyncio.create_task(stop.wait())
        await asyncio.wait([waiter, stopper], return_when=asyncio.FIRST_COMPLETED)
        waiter.cancel()
        stopper.cancel()
        await bookie.stop()
        return bookie

    _serve_until_stopped(serve, server_id)


def _log_to_stderr(quiet: bool) -> None:
    logging.basicConfig(level=logging.WARNING if quiet else logging.INFO, stream=sys.stderr,
                        format="%(asctime)s.%(msecs)03d %(message)s", datefmt="%H:%M:%S")


# ------------------------------------------------------------------------ controller
@click.command()
@click.option("--listen", required=True, callback=_address, metavar="HOST:PORT",
              help="Address for the brokers' ISR updates.")
@click.option("--brokers", required=True, callback=_peers, metavar="S1=HOST:PORT,...",
              help="The partition's replicas: every `hwm node --protocol kafka...` of the cluster.")
@click.option("--data", required=True, type=OutputDir(),
              help="Directory of the partition state (leader epoch, leader, ISR; created if missing).")
@click.option("--protocol", default="kafka", show_default=True, type=RUNTIME_PROTOCOL, callback=_resolved,
              help="A Kafka preset (see `hwm protocols`); unclean_election decides the elections.")
@click.option("--tick-ms", type=click.FloatRange(1, 1000), default=10.0, show_default=True,
              help="Length of one tick; the first election waits up to 100 ticks for every broker.")
@click.option("--quiet", "-q", is_flag=True, help="Only warnings and errors on stderr.")
def controller(listen, brokers, data, protocol, tick_ms, quiet) -> None:
    """Run Kafka's controller for the brokers until SIGTERM or Ctrl-C.

    It elects the partition's leader from the ISR and makes the leaders' ISR
    changes; it is one process (a single point of failure). Exit status: 0 after
    a clean stop; 1 when it cannot start or had to stop; 2 on bad arguments or a
    data directory another controller holds.
    """
    from hwm.impl.controller import ControllerConfig, run_controller

    try:
        config = ControllerConfig(listen, brokers, str(data), protocol, tick_seconds=tick_ms / 1000)
    except ValueError as error:
        raise click.UsageError(str(error)) from None
    if listen in brokers.values():
        raise click.BadParameter(f"{format_address(listen)} is also a broker's address", param_hint="--listen")
    _log_to_stderr(quiet)

    async def serve():
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, stop.set)
        return await run_controller(config, stop)

    _serve_until_stopped(serve, "controller")


def _serve_until_stopped(serve, name: str) -> None:
    """Run a node's or the controller's `serve()`; exit 2 on a usage error (a held data
    directory), 1 when it cannot start or stopped on a failure."""
    from hwm.impl.runtime import NodeError
    from hwm.properties.rules import HookError

    try:
        finished = asyncio.run(serve())
    except NodeError as error:
        if error.usage:
            click.echo(f"error: {error}", err=True)
            sys.exit(2)
        _fail(str(error))
    if isinstance(finished.failure, HookError):  # the variant's rule, not the node: exit 2, as hwm check
        click.echo(f"error: {name} stopped: {finished.failure}", err=True)
        sys.exit(2)
    if finished.failure is not None:
        _fail(f"{name} stopped: {finished.failure}")


# --------------------------------------------------------------------------- cluster
def _port_free(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


HWM_ARGV = [sys.executable, "-c", "from hwm.cli import main; main(prog_name='hwm')"]
CONTROLLER_ID = "controller"  # the controller's name in `hwm cluster` (its data is DIR/controller)


def node_command(server_id: str, servers: dict[str, tuple[str, int]], data: Path, protocol: str,
                 extra: tuple[str, ...] = (), controller: tuple[str, int] | None = None) -> list[str]:
    """The argv that runs `hwm node` for `server_id` of `servers` with this Python (a Kafka broker
    with its `controller`)."""
    peers = ",".join(f"{s}={format_address(a)}" for s, a in servers.items() if s != server_id)
    argv = HWM_ARGV + ["node", "--id", server_id, "--listen", format_address(servers[server_id]),
                       "--data", str(data / server_id), "--protocol", protocol]
    if peers:
        argv += ["--peers", peers]
    if controller is not None:
        argv += ["--controller", format_address(controller)]
    return argv + list(extra)


def controller_command(address: tuple[str, int], servers: dict[str, tuple[str, int]], data: Path, protocol: str,
                       extra: tuple[str, ...] = ()) -> list[str]:
    """The argv that runs `hwm controller` for the brokers `servers` with this Python."""
    brokers = ",".join(f"{s}={format_address(a)}" for s, a in servers.items())
    return HWM_ARGV + ["controller", "--listen", format_address(address), "--brokers", brokers,
                       "--data", str(data / CONTROLLER_ID), "--protocol", protocol] + list(extra)


def _die_with_parent() -> None:
    """In a child: get SIGTERM if the supervisor dies, so no server outlives `hwm cluster`."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


@click.command()
@click.option("--servers", type=click.IntRange(1, 9), default=3, show_default=True)
@click.option("--data", type=OutputDir(), default=DEFAULT_DATA, show_default=True,
              help="Directory for the servers' data (DIR/S1, DIR/S2, ...) and DIR/cluster.json.")
@click.option("--base-port", type=click.IntRange(1, 65535 - 9), default=7001, show_default=True,
              help="S1 listens on this port, S2 on the next, ... (a Kafka cluster's controller after the last).")
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--protocol", "spec", default="raft", show_default=True, type=RUNTIME_PROTOCOL,
              help="Preset, optionally with flags (see `hwm protocols`), passed to every `hwm node`.")
@click.option("--restart-after", type=click.FloatRange(0, 3600), default=None,
              help="Restart a server that exits, after this many seconds [default: leave it down].")
@click.option("--quiet", "-q", is_flag=True, help="Pass --quiet to every server.")
@click.option("--record", type=OutputDir(), default=None,
              help="Each server records its part of the run in DIR/<server>.jsonl (`hwm validate DIR`).")
def cluster(servers, data, base_port, host, spec, restart_after, quiet, record=None) -> None:
    """Start a local cluster of `hwm node` processes and supervise it until Ctrl-C or SIGTERM.

    Prints where each server listens and the --cluster string, and writes it to
    DIR/cluster.json, where `hwm put/get/status --data DIR` find it. The data
    survives: running it again on the same DIR restarts the same servers. Exit
    status 2 when a server exited with status 2 (bad input, such as a variant's
    rule that raised), once every server has stopped.
    """
    protocol = spec_text(spec)  # what every `hwm node` is given
    ids = [f"S{k}" for k in range(1, servers + 1)]
    addresses = {server: (host, base_port + k) for k, server in enumerate(ids)}
    system = resolve(spec)[1].system
    kafka, bookkeeper = system == "kafka", system == "bookkeeper"
    if bookkeeper and record is not None:
        raise click.BadParameter("BookKeeper's bookies do not record runs", param_hint="--record")
    controller_address = (host, base_port + servers) if kafka else None
    listening = dict(addresses, **({CONTROLLER_ID: controller_address} if kafka else {}))
    taken = [f"{s}={format_address(a)}" for s, a in listening.items() if not _port_free(*a)]
    if taken:
        _fail(f"port in use: {', '.join(taken)}; pick another --base-port")
    cluster_string = ",".join(f"{s}={format_address(a)}" for s, a in addresses.items())
    cluster_file = data / CLUSTER_FILE
    document = {"format": CLUSTER_FORMAT, "protocol": protocol,
                "servers": {s: format_address(a) for s, a in addresses.items()}}
    if kafka:
        document["controller"] = format_address(controller_address)
    try:  # OutputDir checked both paths; what fails now (a full disk) is one line, before any server starts
        data.mkdir(parents=True, exist_ok=True)
        if record is not None:
            record.mkdir(parents=True, exist_ok=True)
        cluster_file.write_text(json.dumps(document, indent=2) + "\n")
    except OSError as error:
        click.echo(f"error: cannot write {error.filename or data}: {error.strerror or error}", err=True)
        sys.exit(EXIT_USAGE)
    extra = ("--quiet",) if quiet else ()
    commands = {s: node_command(s, addresses, data, protocol,
                                extra + (("--record", str(record / f"{s}.jsonl")) if record is not None else ()),
                                controller_address) for s in ids}
    if bookkeeper:
        # Bookies: no peers (they never talk to each other), the ledger's metadata file in DIR.
        commands = {s: node_command(s, {s: addresses[s]}, data, protocol, extra + ("--ledger", str(data / "ledger.json")))
                    for s in ids}
    if kafka:
        # Kafka's controller (hwm controller): started first, supervised like the brokers.
        commands = {CONTROLLER_ID: controller_command(controller_address, addresses, data, protocol, extra),
                    **commands}

    stopping = []
    refused: list[str] = []  # servers that exited with status 2

    def on_signal(signum, frame):
        stopping.append(signum)

    previous = {signum: signal.signal(signum, on_signal) for signum in (signal.SIGINT, signal.SIGTERM)}
    processes: dict[str, subprocess.Popen] = {}
    restart_at: dict[str, float] = {}

    def launch(server: str) -> None:
        processes[server] = subprocess.Popen(commands[server], start_new_session=True, preexec_fn=_die_with_parent)

    try:
        for server in commands:
            launch(server)
        click.echo(f"hwm cluster: {servers} server{'s' if servers > 1 else ''}, protocol {protocol}, data in {data}/")
        for server in commands:
            click.echo(f"  {server}  {format_address(listening[server])}  pid {processes[server].pid}  "
                       f"data {data / server}")
        click.echo(f"--cluster {cluster_string}")
        if bookkeeper:
            click.echo(f"(also in {cluster_file}: the bookies of one ledger, whose writer and recovery client are "
                       f"hwm.impl.bookie_server.LedgerClient; its metadata is {data / 'ledger.json'})")
        else:
            click.echo(f"(also in {cluster_file}: hwm put --data {data} VALUE; hwm get --data {data} 1; "
                       f"hwm status --data {data})")
        click.echo("Ctrl-C stops every server.", err=True)
        sys.stdout.flush()
        while not stopping:
            time.sleep(0.1)
            for server, process in processes.items():
                if server in restart_at:
                    if time.monotonic() >= restart_at[server]:
                        del restart_at[server]
                        launch(server)
                        click.echo(f"hwm cluster: restarted {server} (pid {processes[server].pid})", err=True)
                    continue
                code = process.poll()
                if code is None or getattr(process, "reported", False):
                    continue
                process.reported = True  # type: ignore[attr-defined]
                if code == 2:  # bad input (a variant's rule that raised, a held directory): the cluster's status too
                    refused.append(server)
                how = f"signal {signal.Signals(-code).name}" if code < 0 else f"status {code}"
                if restart_after is not None:
                    restart_at[server] = time.monotonic() + restart_after
                    click.echo(f"hwm cluster: {server} (pid {process.pid}) exited with {how}; restarting in "
                               f"{restart_after:g} s", err=True)
                else:
                    click.echo(f"hwm cluster: {server} (pid {process.pid}) exited with {how}; restart it with:\n  "
                               + " ".join(_quote(a) for a in ["hwm"] + commands[server][3:]), err=True)
            if not restart_at and all(p.poll() is not None for p in processes.values()):
                click.echo("error: every server has exited", err=True)
                sys.exit(EXIT_USAGE if refused else EXIT_FAILED)  # 2: one exited with 2 (bad input)
    finally:
        for process in processes.values():
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 5
        for process in processes.values():
            try:
                process.wait(max(deadline - time.monotonic(), 0.01))
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    click.echo("hwm cluster: every server stopped", err=True)
    if refused:
        click.echo(f"error: {', '.join(refused)} exited with status 2 (bad input: see {'its' if len(refused) == 1 else 'their'} "
                   f"line above)", err=True)
        sys.exit(EXIT_USAGE)


def _quote(arg: str) -> str:
    import shlex

    return shlex.quote(arg)


# ---------------------------------------------------------------------- put, get, status
@click.command()
@click.argument("value")
@_cluster_options
def put(value, cluster, data, timeout) -> None:
    """Write VALUE (UTF-8) to the replicated log; print its index once committed.

    Exit status 1 when no leader is reachable or the outcome is unknown (the
    leader accepted the value but did not confirm it in time).
    """
    servers = _cluster_servers(cluster, data)
    with Client(servers, timeout=timeout) as client:
        try:
            index = client.put(value.encode("utf-8"))
        except ClientError as error:
            _fail(str(error))
        click.echo(f"committed at index {index} (leader {client.leader})")


@click.command()
@click.argument("index", type=click.IntRange(1), required=False)
@click.option("--all", "read_all", is_flag=True, help="Every committed entry, 1 .. the server's HWM.")
@click.option("--server", default=None, help="Read from this server (its own HWM) instead of the leader.")
@_cluster_options
def get(index, read_all, server, cluster, data, timeout) -> None:
    """Read entry INDEX (or --all): refused above the high-water mark ("not yet committed").

    Reads from the leader unless --server names another server.
    """
    if (index is None) == (not read_all):
        raise click.UsageError("give an INDEX or --all (not both)")
    servers = _cluster_servers(cluster, data)
    if server is not None and server not in servers:
        raise click.BadParameter(f"{server!r} is not one of {', '.join(servers)}", param_hint="--server")
    with Client(servers, timeout=timeout) as client:
        try:
            if not read_all:
                generation, value = client.get(index, server)
                click.echo(f"{index}\tgeneration {generation}\t{_show_value(value)}")
                return
            source = server or client.find_leader()
            [answer] = client.status([source])
            if answer.reply is None:
                _fail(f"{client.describe(source)}: {answer.error}")
            for k in range(1, answer.reply.hwm + 1):
                generation, value = client.get(k, source)
                click.echo(f"{k}\tgeneration {generation}\t{_show_value(value)}")
            click.echo(f"({answer.reply.hwm} committed entries on {source})", err=True)
        except NotCommittedError as error:
            _fail(str(error))
        except ClientError as error:
            _fail(str(error))


@click.command()
@click.option("--json", "as_json", is_flag=True, help="One JSON object per server.")
@_cluster_options
def status(as_json, cluster, data, timeout) -> None:
    """Each server's role, generation, last index, high-water mark and known leader.

    Exit status 1 when no server answers.
    """
    servers = _cluster_servers(cluster, data)
    with Client(servers, timeout=timeout) as client:
        answers = client.status(timeout=min(timeout, 2.0))
    if as_json:
        for a in answers:
            row = {"server": a.server, "address": format_address(a.address)}
            if a.reply is None:
                row["error"] = a.error
            else:
                row.update(role=a.reply.role, generation=a.reply.generation, last_index=a.reply.last_index,
                           hwm=a.reply.hwm, leader=a.reply.leader)
            click.echo(json.dumps(row))
    else:
        rows = [("server", "address", "role", "generation", "last index", "HWM", "leader")]
        for a in answers:
            if a.reply is None:
                rows.append((a.server, format_address(a.address), f"unreachable ({a.error})"))
            else:
                r = a.reply
                rows.append((a.server, format_address(a.address), r.role, str(r.generation), str(r.last_index),
                             str(r.hwm), r.leader or "-"))
        full = [row for row in rows if len(row) == len(rows[0])]
        widths = [max(len(row[k]) for row in full) for k in range(len(rows[0]))]
        for row in rows:
            click.echo("  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip())
    if all(a.reply is None for a in answers):
        _fail("no server answered: " + ", ".join(f"{a.server}={format_address(a.address)} ({a.error})"
                                                  for a in answers))


COMMANDS = (node, controller, cluster, put, get, status)
