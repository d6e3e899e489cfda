"""Kafka on the TCP runtime: `hwm controller` and `hwm node --protocol kafka... --controller` as real
processes on 127.0.0.1 with their real write-ahead logs; kill -9, restart; bad input.

Every process runs in its own process group and is killed in a `finally`; every wait is bounded
(and the whole test by test_e2e's alarm).
"""

from __future__ import annotations

import asyncio
import json
import subprocess

import pytest
from click.testing import CliRunner

from hwm.cli import main
from hwm.impl import codec
from hwm.impl import messages as m
from hwm.impl.client import Client, NotCommittedError, format_address
from hwm.impl.controller import PARTITION_STATE_FILE, ControllerConfig, ControllerNode
from hwm.impl.kafka import KafkaReplica
from hwm.impl.runtime import Node, NodeConfig
from hwm.properties.protocol import PRESETS
from tests.impl.ports import free_ports
from tests.impl.test_e2e import (HWM, Processes, kill_cluster, overall_timeout, statuses, stop_cluster,  # noqa: F401
                                 wait_caught_up, wait_for)  # (overall_timeout: an autouse fixture)

pytestmark = pytest.mark.network
CONTROLLER = "controller"


class KafkaProcesses(Processes):
    """The brokers S1..S3 and their controller, each an `hwm` process."""

    def __init__(self, tmp_path, protocol: str):
        ports = free_ports(4)
        self.controller_address = ("127.0.0.1", ports[3])
        super().__init__(tmp_path, {f"S{k + 1}": ("127.0.0.1", ports[k]) for k in range(3)}, protocol)

    def argv(self, server: str) -> list[str]:
        if server == CONTROLLER:
            brokers = ",".join(f"{s}={format_address(a)}" for s, a in self.addresses.items())
            return HWM + ["controller", "--listen", format_address(self.controller_address), "--brokers", brokers,
                          "--data", str(self.tmp_path / CONTROLLER), "--protocol", self.protocol]
        return super().argv(server) + ["--controller", format_address(self.controller_address)]

    def start_all(self) -> None:
        for server in [CONTROLLER, *self.addresses]:
            self.start(server)

    def partition_state(self) -> dict:
        return json.loads((self.tmp_path / CONTROLLER / PARTITION_STATE_FILE).read_text())


def leader_of(client: Client) -> str | None:
    return next((s for s, r in statuses(client).items() if r is not None and r.role == "leader"), None)


def test_three_kafka_brokers_answer_a_write_once_the_hw_covers_it_and_serve_reads_up_to_the_hw(tmp_path):
    processes = KafkaProcesses(tmp_path, "kafka")
    try:
        processes.start_all()
        with Client(processes.addresses, timeout=20) as client:
            written = {client.put(f"entry {k}".encode()): f"entry {k}".encode() for k in range(20)}
            assert sorted(written) == list(range(2, 22))  # index 1 opened the client's session
            leader = client.leader
            # acks=all: answered means the HW covers it, on the leader, so every write reads back.
            assert statuses(client)[leader].hwm >= 21
            for index, value in written.items():
                assert client.get(index) == (1, value)
            with pytest.raises(NotCommittedError, match="not yet committed"):
                client.get(22)
            # The followers learn the HW from their next fetch and serve reads up to it.
            wait_for(lambda: all(r.hwm == 21 and r.last_index == 21 for r in statuses(client).values()),
                     20, "the followers' HW")
            for follower in set(processes.addresses) - {leader}:
                assert client.get(21, server=follower) == (1, b"entry 19")
        state = processes.partition_state()
        assert state == {"leader_epoch": 1, "leader": leader, "isr": ["S1", "S2", "S3"]}
    except BaseException:
        print(processes.output())
        raise
    finally:
        processes.close()


def test_kill_9_the_kafka_leader_the_controller_elects_from_the_isr_and_no_acknowledged_write_is_lost(tmp_path):
    processes = KafkaProcesses(tmp_path, "kafka")
    try:
        processes.start_all()
        with Client(processes.addresses, timeout=20) as client:
            written = {client.put(f"entry {k}".encode()): f"entry {k}".encode() for k in range(30)}
            old_leader = client.leader
            processes.kill(old_leader)
            new_leader = wait_for(lambda: leader_of(client), 20, "the controller to elect a new leader")
            assert new_leader != old_leader
            after = client.put(b"after the failover")
            assert after == 32  # an index of an acknowledged write handed out again is a lost write
            written[after] = b"after the failover"
            for index, value in written.items():
                assert client.get(index)[1] == value, index
            assert statuses(client)[new_leader].generation == 2  # the controller's second leader epoch
            state = processes.partition_state()
            assert state["leader"] == new_leader and state["leader_epoch"] == 2

            # The old leader comes back as a follower, truncates as the new leader says, catches up,
            # and rejoins the ISR.
            processes.start(old_leader)

            wait_caught_up(client, old_leader, new_leader, 32)
            wait_for(lambda: old_leader in processes.partition_state()["isr"], 20, f"{old_leader} back in the ISR")
            for index, value in written.items():
                assert client.get(index, server=old_leader)[1] == value
    except BaseException:
        print(processes.output())
        raise
    finally:
        processes.close()


@pytest.mark.parametrize("preset", ["kafka", "kafka-unclean-election"])
def test_when_every_isr_replica_dies_unclean_election_loses_an_acknowledged_write_and_the_safe_preset_waits(
        preset, tmp_path):
    """The ISR shrinks to the leader and one follower (a third broker is down), a write is
    acknowledged, both die, and the broker that missed the write comes back first. Under
    kafka-unclean-election the controller makes it leader and the other follower truncates the
    acknowledged write away (AckedWriteNeverLost, on real processes); under kafka the partition
    stays offline until an ISR replica returns, and the write is kept."""
    processes = KafkaProcesses(tmp_path, preset)
    try:
        processes.start_all()
        with Client(processes.addresses, timeout=20) as client:
            client.put(b"before")
            leader = client.leader
            follower, missed = sorted(set(processes.addresses) - {leader})
            processes.kill(missed)
            acked = client.put(b"acknowledged")  # answered once the leader dropped `missed` from the ISR
            assert missed not in processes.partition_state()["isr"]
        processes.kill(follower)
        processes.kill(leader)
        processes.start(missed)
        with Client(processes.addresses, timeout=20) as client:
            if preset == "kafka":
                with pytest.raises(AssertionError, match="timed out"):
                    wait_for(lambda: leader_of(client), 1.5, "a leader")  # offline: no live ISR replica
                processes.start(follower)
                processes.start(leader)
            else:
                wait_for(lambda: leader_of(client) == missed, 20, f"the unclean election of {missed}")
                processes.start(follower)
            wait_for(lambda: leader_of(client), 20, "a leader")
            client.put(b"after")
            # The leader that answers the read may not be the one that answered the put (the controller
            # may elect again as brokers return), and a new leader's HW covers its log only once its
            # followers have fetched: the read waits for that, as a client retries.
            read: list[bytes] = []

            def read_back() -> bool:
                try:
                    read.append(client.get(acked)[1])
                except NotCommittedError:
                    return False
                return True
            wait_for(read_back, 20, f"entry {acked} committed on the leader")
            value = read[-1]
        if preset == "kafka":
            assert value == b"acknowledged"
        else:
            assert value != b"acknowledged"  # the acknowledged write is gone from every live log
    except BaseException:
        print(processes.output())
        raise
    finally:
        processes.close()


# ------------------------------------------------------------------------------ bad input
def test_garbage_and_foreign_messages_to_a_kafka_broker_or_its_controller_are_refused_by_name(tmp_path):
    ports = free_ports(2)
    kafka = PRESETS["kafka"].protocol
    controller_address = ("127.0.0.1", ports[1])
    node = Node(NodeConfig("S1", ("127.0.0.1", ports[0]), {"S2": ("127.0.0.1", free_ports(1)[0])},
                           str(tmp_path / "S1"), kafka, controller=controller_address))
    controller = ControllerNode(ControllerConfig(controller_address, {"S1": ("127.0.0.1", ports[0]),
                                                                      "S2": node.config.peers["S2"]},
                                                 str(tmp_path / CONTROLLER), kafka))
    loop = asyncio.new_event_loop()
    try:
        loop.run_until_complete(node.start())
        loop.run_until_complete(controller.start())
        assert isinstance(node.replica, KafkaReplica)

        async def ask(address, frame):
            reader, writer = await asyncio.open_connection(*address)
            writer.write(frame)
            async with asyncio.timeout(10):
                data = await reader.read()
            writer.close()
            return codec.decode(codec.FrameReader().feed(data)[0])

        answers = [loop.run_until_complete(ask(address, frame)) for address, frame in [
            (node.config.listen, b"\x00\x00\x00\x05garbage"),
            (node.config.listen, codec.encode(m.AppendRequest(1, "S2", 0, 0, (), 0))),
            (node.config.listen, codec.encode(m.FetchRequest("S9", 0, None))),
            (controller_address, b"\x00\x00\x00\x05garbage"),
            (controller_address, codec.encode(m.FetchRequest("S2", 0, None))),
            (controller_address, codec.encode(m.AlterIsr("S9", 1, ("S9",)))),
        ]]
        assert all(type(a) is m.ErrorReply for a in answers), answers
        texts = [a.text for a in answers]
        assert texts[0].startswith("bad frame")
        assert "cannot step a AppendRequest: not a Kafka replica's message" in texts[1]
        assert "from 'S9', which is not one of its peers" in texts[2]
        assert texts[3].startswith("bad frame")
        assert "accepts only AlterIsr" in texts[4] and "not a FetchRequest" in texts[4]
        assert "not an AlterIsr from 'S9'" in texts[5]
        assert node.replica.last_index == 0 and controller.controller.leader_epoch == 0  # nothing reached them
    finally:
        loop.run_until_complete(controller.stop())
        loop.run_until_complete(node.stop())
        loop.close()


def test_the_kafka_commands_refuse_a_missing_or_misplaced_controller_with_exit_2(tmp_path):
    runner = CliRunner()
    base = ["--listen", "127.0.0.1:1", "--data", str(tmp_path / "d")]
    result = runner.invoke(main, ["node", "--id", "S1", "--protocol", "kafka"] + base)
    assert result.exit_code == 2 and "needs its controller's address (--controller" in result.output, result.output
    result = runner.invoke(main, ["node", "--id", "S1", "--protocol", "raft", "--controller", "127.0.0.1:2"] + base)
    assert result.exit_code == 2 and "--controller is for Kafka brokers" in result.output, result.output
    result = runner.invoke(main, ["controller", "--brokers", "S1=127.0.0.1:3", "--protocol", "zab"] + base)
    assert result.exit_code == 2 and "the controller is Kafka's" in result.output, result.output
    result = runner.invoke(main, ["node", "--id", "S1", "--protocol", "kafka-kip101,follower_truncation="
                                  "last-fetched-epoch", "--controller", "127.0.0.1:2"] + base)
    assert result.exit_code == 2 and "model-only" in result.output, result.output
    assert not (tmp_path / "d").exists()


def test_hwm_cluster_protocol_kafka_starts_the_controller_and_three_brokers_and_sigterm_stops_all(tmp_path):
    import os
    import signal

    from tests.impl.test_e2e import _consecutive_free_ports

    data = tmp_path / "cluster"
    base = _consecutive_free_ports(4)
    supervisor = subprocess.Popen(HWM + ["cluster", "--protocol", "kafka", "--data", str(data), "--base-port",
                                         str(base), "--quiet"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  text=True, start_new_session=True)
    pids: list[int] = []
    try:
        lines = [supervisor.stdout.readline() for _ in range(6)]
        pids = [int(line.split("pid ")[1].split()[0]) for line in lines if " pid " in line]
        assert len(pids) == 4 and lines[1].split()[:2] == ["controller", f"127.0.0.1:{base + 3}"], lines
        assert lines[5].strip() == (f"--cluster S1=127.0.0.1:{base},S2=127.0.0.1:{base + 1},"
                                    f"S3=127.0.0.1:{base + 2}")
        assert json.loads((data / "cluster.json").read_text())["controller"] == f"127.0.0.1:{base + 3}"
        runner, env = CliRunner(), {"HWM_CLUSTER": None}
        result = runner.invoke(main, ["put", "--data", str(data), "--timeout", "20", "hello"], env=env)
        assert result.exit_code == 0 and result.output.startswith("committed at index 2 (leader S"), result.output
        result = runner.invoke(main, ["get", "--data", str(data), "2"], env=env)
        assert result.exit_code == 0 and result.output.split("\t")[-1].strip() == "hello", result.output
        result = runner.invoke(main, ["get", "--data", str(data), "3"], env=env)
        assert result.exit_code == 1 and "not yet committed" in result.output
        stop_cluster(supervisor, pids)
    finally:
        kill_cluster(supervisor, pids)


def test_a_restarted_controller_goes_on_from_its_saved_epoch_and_isr(tmp_path):
    """The controller's partition state is on disk: kill -9 it, the brokers keep serving (no ISR
    change is needed); restarted, it re-registers the brokers without a new election, and elects
    the next leader in epoch 2 when the leader dies."""
    processes = KafkaProcesses(tmp_path, "kafka")
    try:
        processes.start_all()
        with Client(processes.addresses, timeout=20) as client:
            first = client.put(b"first")
            leader = client.leader
            processes.kill(CONTROLLER)
            second = client.put(b"while the controller is down")
            processes.start(CONTROLLER)
            log = processes.logs[-1]  # the restarted controller's
            wait_for(lambda: all(f"{s} is live" in log.read_text() for s in processes.addresses), 20,
                     "the controller to see the brokers")
            third = client.put(b"third")
            assert "elected" not in log.read_text()  # it knows the leader of epoch 1: no new election
            assert statuses(client)[leader].generation == 1 and processes.partition_state()["leader_epoch"] == 1
            processes.kill(leader)
            wait_for(lambda: leader_of(client) not in (None, leader), 20, "a new leader")
            assert processes.partition_state()["leader_epoch"] == 2
            client.put(b"after")
            assert [client.get(k)[1] for k in (first, second, third)] == [
                b"first", b"while the controller is down", b"third"]
    except BaseException:
        print(processes.output())
        raise
    finally:
        processes.close()


def test_a_damaged_partition_state_stops_the_controller_naming_the_file(tmp_path):
    (tmp_path / CONTROLLER).mkdir()
    state = tmp_path / CONTROLLER / PARTITION_STATE_FILE
    for text, why in [("{not json", "cannot read"), ('{"leader_epoch": 1, "leader": "S7", "isr": ["S1"]}',
                                                     "is not a partition state")]:
        state.write_text(text)
        result = CliRunner().invoke(main, ["controller", "--listen", f"127.0.0.1:{free_ports(1)[0]}", "--brokers",
                                           "S1=127.0.0.1:1,S2=127.0.0.1:2", "--data", str(tmp_path / CONTROLLER)])
        assert result.exit_code == 1 and str(state) in result.output and why in result.output, result.output
        assert state.read_text() == text  # left alone


# ------------------------------------------------------------------ the replica's timers (sans-IO)
def _broker(name: str, lag: int | None = 4) -> KafkaReplica:
    from hwm.impl.storage import Durable

    peers = tuple(s for s in ("S1", "S2", "S3") if s != name)
    return KafkaReplica(name, peers, PRESETS["kafka"].protocol, Durable(0, None, 0, ()), replica_lag_ticks=lag)


def _sent(replica: KafkaReplica) -> list:
    return [(to, type(message).__name__) for to, message in replica.ready().messages]


def test_on_ticks_a_leader_holds_an_empty_fetch_until_a_write_or_the_wait_and_drops_a_silent_follower():
    leader = _broker("S1")
    leader.step(m.LeaderAndIsr(1, "S1", ("S1", "S2", "S3")))
    leader.ready()
    leader.step(m.FetchRequest("S2", 0, 1))
    leader.step(m.FetchRequest("S3", 0, 1))
    assert _sent(leader) == []  # nothing to send yet: both held (DelayedFetch)
    leader.propose(b"x")
    assert sorted(_sent(leader)) == [("S2", "FetchReply"), ("S3", "FetchReply")]  # the write answers them
    leader.step(m.FetchRequest("S2", 1, 1))  # S2 has it; S3 goes silent
    assert leader.hwm == 0 and _sent(leader) == []
    for _ in range(2):
        leader.tick()
    assert _sent(leader) == [("S2", "FetchReply")]  # the held fetch waited half the lag
    for _ in range(2):
        leader.tick()
    assert _sent(leader) == []  # S3 is behind, but last caught up 4 ticks ago (tick 0): not more yet
    leader.tick()
    [(to, alter)] = leader.ready().messages
    assert to == "controller" and alter == m.AlterIsr("S1", 1, ("S1", "S2"))
    leader.step(m.AlterIsrReply(1, True, ("S1", "S2")))
    assert leader.isr == ("S1", "S2") and leader.hwm == 1 and leader.acknowledged() == ((1, 1),)


def test_on_ticks_a_follower_fetches_from_its_leader_and_again_when_the_answer_is_lost():
    follower = _broker("S2")
    follower.tick()
    assert _sent(follower) == []  # no leader known: nothing to fetch from
    follower.step(m.LeaderAndIsr(1, "S1", ("S1", "S2", "S3")))
    follower.tick()
    assert _sent(follower) == [("S1", "FetchRequest")]
    for _ in range(3):
        follower.tick()
    assert _sent(follower) == []
    follower.tick()
    assert _sent(follower) == [("S1", "FetchRequest")]  # unanswered for 4 ticks: lost, asked again


def test_without_the_lag_ticks_time_does_nothing_as_the_simulation_expects():
    leader = _broker("S1", lag=None)
    leader.step(m.LeaderAndIsr(1, "S1", ("S1", "S2", "S3")))
    leader.ready()
    leader.step(m.FetchRequest("S2", 0, 1))
    assert _sent(leader) == [("S2", "FetchReply")]  # answered at once, empty
    leader.propose(b"x")
    leader.ready()
    for _ in range(100):
        leader.tick()
    assert _sent(leader) == []
    with pytest.raises(ValueError, match="replica_lag_ticks"):
        _broker("S1", lag=0)


@pytest.mark.deep
def test_rounds_of_kill_9_on_the_kafka_leader_under_writes_lose_no_acknowledged_write(tmp_path):
    """Ten rounds: a writer keeps writing while the leader is killed and restarted (and rejoins the
    ISR); every write the cluster answered is read back at its index at the end, from every broker."""
    import threading

    from hwm.impl.client import ClientError

    processes = KafkaProcesses(tmp_path, "kafka")
    acknowledged: dict[int, bytes] = {}
    stop = threading.Event()
    reused: list[int] = []  # indexes answered twice: the first write was lost

    def writer():
        with Client(processes.addresses, timeout=20) as client:
            k = 0
            while not stop.is_set():
                value = f"write {k}".encode()
                k += 1
                try:
                    index = client.put(value)
                except ClientError:
                    continue  # not answered: it may or may not be there, and promises nothing
                if index in acknowledged:
                    reused.append(index)
                acknowledged[index] = value

    try:
        processes.start_all()
        thread = threading.Thread(target=writer, daemon=True)
        thread.start()
        with Client(processes.addresses, timeout=20) as client:
            for round in range(10):
                wait_for(lambda: len(acknowledged) > 20 * (round + 1), 20, "some writes")
                leader = wait_for(lambda: leader_of(client), 20, "a leader")
                processes.kill(leader)
                wait_for(lambda: leader_of(client) not in (None, leader), 20, "a new leader")
                processes.start(leader)
                # Killing the next leader before this one is back in the ISR would leave the ISR
                # with no live replica: the partition offline, as Kafka keeps it (not what this tests).
                wait_for(lambda: len(processes.partition_state()["isr"]) == 3, 20, f"{leader} back in the ISR")
            stop.set()
            thread.join(30)
            final = wait_for(lambda: leader_of(client), 20, "a leader")
            hwm = statuses(client)[final].hwm
            wait_for(lambda: all(r is not None and r.hwm == hwm for r in statuses(client).values()), 20,
                     "every broker to catch up")
            for server in processes.addresses:
                for index, value in acknowledged.items():
                    assert client.get(index, server=server)[1] == value, (server, index)
            assert reused == [] and len(acknowledged) > 200
    except BaseException:
        print(processes.output())
        raise
    finally:
        stop.set()
        processes.close()


def test_a_second_controller_on_the_same_state_exits_2_naming_the_holder(tmp_path):
    brokers = "S1=127.0.0.1:1,S2=127.0.0.1:2"
    first = ControllerNode(ControllerConfig(("127.0.0.1", free_ports(1)[0]), {"S1": ("127.0.0.1", 1),
                                                                            "S2": ("127.0.0.1", 2)},
                                            str(tmp_path / CONTROLLER), PRESETS["kafka"].protocol))
    loop = asyncio.new_event_loop()
    try:
        loop.run_until_complete(first.start())
        second = subprocess.run(HWM + ["controller", "--listen", f"127.0.0.1:{free_ports(1)[0]}", "--brokers", brokers,
                                       "--data", str(tmp_path / CONTROLLER)], capture_output=True, text=True, timeout=60)
        assert second.returncode == 2, second.stderr
        assert "is in use by the controller listening on 127.0.0.1:" in second.stderr, second.stderr
    finally:
        loop.run_until_complete(first.stop())
        loop.close()


def test_on_ticks_a_follower_that_keeps_reaching_the_previous_log_end_stays_in_the_isr_under_steady_writes():
    """Kafka's lastCaughtUpTime: a fetch that reaches the log end of the follower's previous fetch
    counts as caught up as of then, so a follower one write behind at every fetch is not dropped."""
    leader = _broker("S1")
    leader.step(m.LeaderAndIsr(1, "S1", ("S1", "S2", "S3")))
    leader.ready()
    updates = []
    for k in range(20):
        leader.propose(b"w%d" % k)
        leader.step(m.FetchRequest("S2", k, 1))  # S2: always one entry behind
        leader.step(m.FetchRequest("S3", min(k + 1, 2), 1))  # S3 stops at 2, last caught up at tick 1
        leader.tick()
        updates += [(k, x) for to, x in leader.ready().messages if to == "controller"]
    # S3 is dropped once 4 ticks passed since tick 1 (k=5); S2 never, the AlterIsr resent unanswered.
    assert updates and updates[0][0] == 5
    assert {x for _, x in updates} == {m.AlterIsr("S1", 1, ("S1", "S2"))}


@pytest.mark.parametrize("preset", ["kafka", "kafka-truncate-to-hwm"])
def test_kip101_scenario_a_restarted_follower_truncates_to_its_own_hw_and_loses_an_acknowledged_write(
        preset, tmp_path):
    """KIP-101's first scenario on real processes. A third broker is down; a write reaches the
    follower, which is then frozen (SIGSTOP) before it learns the HW that covers it; the leader drops
    the down broker from the ISR and acknowledges the write. Leader and follower die; the follower
    restarts first. Under kafka-truncate-to-hwm it truncates its log to its own (older) HW on
    becoming a follower, is elected, and the old leader truncates the acknowledged write away when
    it follows; under kafka it keeps the write (it asks the leader before truncating)."""
    import os
    import signal
    import threading

    processes = KafkaProcesses(tmp_path, preset)
    try:
        processes.start_all()
        with Client(processes.addresses, timeout=20) as client, Client(processes.addresses, timeout=20) as watcher:
            client.put(b"before")
            leader = client.leader
            follower, down = sorted(set(processes.addresses) - {leader})
            processes.kill(down)
            end = statuses(watcher)[leader].last_index + 1  # where the write goes
            answered: list[int] = []
            writer = threading.Thread(target=lambda: answered.append(client.put(b"acknowledged")), daemon=True)
            writer.start()
            # Its status is answered after the batch that made the write durable and sent the fetch
            # that tells the leader so: frozen from then on, it never hears the HW cover the write.
            wait_for(lambda: getattr(statuses(watcher)[follower], "last_index", None) == end, 5,
                     f"{follower} to fetch the write")
            os.killpg(processes.running[follower].pid, signal.SIGSTOP)  # before it hears the new HW
            assert not answered  # the down broker is still in the ISR: the HW waits
            writer.join(20)
            assert answered == [end]  # acknowledged once the leader dropped the down broker
        # The leader first: once the frozen follower's connection closes, a live leader would drop it
        # from the ISR at once (down, and not caught up since it froze).
        processes.kill(leader)
        processes.kill(follower)
        processes.start(follower)
        with Client(processes.addresses, timeout=20) as client:
            wait_for(lambda: leader_of(client) == follower, 20, f"{follower} elected")
            processes.start(leader)
            wait_for(lambda: (statuses(client).get(leader) is not None
                              and statuses(client)[leader].role == "follower"), 20, f"{leader} following")
            client.put(b"after")
            value = client.get(end)[1]
        if preset == "kafka":
            assert value == b"acknowledged"
        else:
            assert value != b"acknowledged"  # the acknowledged write is lost
    except BaseException:
        print(processes.output())
        raise
    finally:
        processes.close()


def test_a_follower_behind_for_no_longer_than_the_lag_stays_in_the_isr():
    """Partition.getOutOfSyncReplicas: behind the log end is not out of sync until `lag` ticks have
    passed since the follower was last caught up, however late in the run that is."""
    leader = _broker("S1")
    leader.step(m.LeaderAndIsr(1, "S1", ("S1", "S2", "S3")))
    leader.ready()
    for _ in range(12):  # both followers fetch at the (empty) log's end every tick, long past the lag
        leader.tick()
        for follower in ("S2", "S3"):
            leader.step(m.FetchRequest(follower, 0, 1))
        leader.ready()
    leader.propose(b"x")  # now both are behind, caught up one tick ago
    leader.ready()
    for _ in range(3):
        leader.tick()
        assert not [message for to, message in leader.ready().messages if to == "controller"]
    assert leader.isr == ("S1", "S2", "S3")
