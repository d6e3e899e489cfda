"""Kafka under the deterministic simulation: three brokers (`impl.runtime.Node` running
`impl.kafka.KafkaReplica`) and their controller (`impl.controller.ControllerNode`), unmodified, each
on a machine of its own with its own simulated disk.

Everything `bridge.dst` does to the brokers it does here (crashes, power failures, outages,
partitions, ENOSPC and EIO, crashes in the middle of a persist), with the same checks. What is added
is the controller's machine, `controller`, which a step names with `server` 3
(`kafka_schedules()` draws it):

- `crash` / `power`: the controller's process dies (with `power`, its page cache too); with an odd
  `arg`, not at once but *inside* a system call of its next save of the partition-state file (the
  temporary file's open, write, fsync, the rename or the directory's fsync): that is where "decided,
  sent, not yet saved" would show. It restarts `arg` x 50 ms later, from what its disk kept; with
  `arg` 2, 4 or 6 its disk has meanwhile damaged the partition-state file, which no fsync prevents
  (`SimDisk.damage`): torn (a prefix of it kept), lost (zeros) or unreadable (EIO). The controller
  must refuse it; the operator then restores the file from a copy of what it held, and it restarts;
- `fault`: the `arg`-th write-like call of its disk fails with ENOSPC or EIO: it must stop
  (fail-stop) rather than send a decision it could not save; it is restarted at the next `restart`
  step naming it, or at the end;
- `isolate`: the controller is cut off from every broker (its sessions end: it sees every broker
  fail, and elects nobody); `outage` takes the controller's power too;
- `restart`: a stopped controller starts.

Checked on top of `bridge.dst`'s checks: the controller restarts from exactly the leader epoch,
leader and ISR its disk kept (from a damaged file it must not start at all: one it trusted is a
violation, and so is an undamaged file it refuses); its leader epochs never repeat with another
leader (one leader per generation, checked on every broker that becomes leader). Witnesses:
controller crashes, restarts, crashes inside a save, fail-stops, damaged partition-state files it
refused, and the disk's own counts.

`CONTROLLER_PLANTS` adds the controller that sends its decision before saving it
(`controller-sends-first`), the one that takes a partition-state file it cannot read for none and
starts afresh (`controller-trusts-damaged-state`), and the one that rewrites the file in place
instead of replacing it (`controller-saves-in-place`: a crash inside the save leaves it torn).
"""

from __future__ import annotations

import asyncio
import contextvars
import errno
import json
import os

from hwm.bridge.dst.net import MACHINE
from hwm.bridge.dst.schedule import SERVERS, Schedule, Step, schedules
from hwm.bridge.dst.simulation import TICK_SECONDS, _Died, _Simulation
from hwm.impl.controller import PARTITION_STATE_FILE, ControllerConfig, ControllerNode, parse_partition_state
from hwm.impl.kafka import CONTROLLER, Controller
from hwm.impl.runtime import NodeError

__all__ = ["CONTROLLER_STEP", "CONTROLLER_PLANTS", "kafka_schedules"]

CONTROLLER_STEP = 3  # a step's `server` that names the controller
CONTROLLER_ADDRESS = ("10.0.0.9", 7000)
CONTROLLER_DATA = "/data/controller"
STARTUP_TICKS = 10  # the controller waits this long for every broker before its first election


class _SendsBeforeSavingController(ControllerNode):
    """Planted bug: the controller sends what it decided, then saves the partition state."""

    def _publish(self) -> None:
        for broker, message in self.controller.ready():
            link = self._links.get(broker)
            if link is not None:
                link.send(message)
        try:
            self._save()
        except OSError as error:
            self.failure = error
            asyncio.get_running_loop().create_task(self.stop())


class _TrustsDamagedStateController(ControllerNode):
    """Planted bug: a partition-state file it cannot read is taken for none (a fresh start, from
    leader epoch 0), as storage studies found systems treat a corrupted file as a missing one."""

    def load_state(self):
        try:
            return super().load_state()
        except NodeError:
            return None


class _SavesInPlaceController(ControllerNode):
    """Planted bug: the partition state is rewritten in place (truncate, write, fsync) rather than
    replaced through a temporary file: a crash inside the write leaves the only copy torn."""

    def _save(self) -> None:
        c = self.controller
        state = (c.leader_epoch, c.leader, c.isr)
        if state == self._saved:
            return
        fd = self.fs.open(self._path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            self.fs.write(fd, json.dumps({"leader_epoch": c.leader_epoch, "leader": c.leader,
                                          "isr": list(c.isr)}).encode("utf-8"))
            self.fs.fsync(fd)
        finally:
            self.fs.close(fd)
        self._saved = state


CONTROLLER_PLANTS: dict[str | None, type[ControllerNode]] = {
    None: ControllerNode,
    "controller-sends-first": _SendsBeforeSavingController,
    "controller-trusts-damaged-state": _TrustsDamagedStateController,
    "controller-saves-in-place": _SavesInPlaceController,
}
DAMAGES = {2: "torn", 4: "lost", 6: "eio"}  # a controller crash step's `arg` -> what its disk does to the file
STATE_PATH = os.path.join(CONTROLLER_DATA, PARTITION_STATE_FILE)


class KafkaSimulation(_Simulation):
    def __init__(self, schedule: Schedule, plant: str | None, first_violation: bool, protocol, disk: str,
                 clients: int = 1):
        controller_plant = plant if plant in CONTROLLER_PLANTS else None
        super().__init__(schedule, None if controller_plant else plant, first_violation, protocol, disk, clients)
        self.controller_class = CONTROLLER_PLANTS[controller_plant]
        self.disks[CONTROLLER] = self.make_disk(len(SERVERS))
        self.controller: ControllerNode | None = None
        self.controller_starts = 0
        self.controller_armed: bool | None = None  # power loss, for a crash inside its next save
        self.controller_died_in_a_call = 0  # the disk's count of crashes inside a call, last seen
        self.controller_damage: tuple[str, bytes] | None = None  # (kind, what the file held) until a start

    def node_options(self) -> dict:
        return {"controller": CONTROLLER_ADDRESS}

    # ------------------------------------------------------------------ the controller's machine
    def start_controller(self) -> None:
        if self.controller is not None:
            return
        self.controller_starts += 1
        config = ControllerConfig(CONTROLLER_ADDRESS, dict(self.addresses), CONTROLLER_DATA, self.protocol,
                                  tick_seconds=TICK_SECONDS, startup_ticks=STARTUP_TICKS)
        node = self.controller_class(config, fs=self.disks[CONTROLLER])
        self.controller = node
        context = contextvars.copy_context()
        context.run(MACHINE.set, CONTROLLER)
        self.loop.create_task(self._boot_controller(node), context=context)
        self.event("start controller")

    def _kept_state(self, kept: bytes | None) -> tuple | None:
        """(leader epoch, leader, ISR) a controller must start from when its disk kept `kept`; None
        when `kept` is no partition state (it must not start from it at all)."""
        try:
            state = None if kept is None else parse_partition_state(json.loads(kept), self.addresses)
        except ValueError:
            return None
        fresh = Controller(tuple(self.addresses), self.protocol, state=state, live=())
        return fresh.leader_epoch, fresh.leader, fresh.isr

    async def _boot_controller(self, node: ControllerNode) -> None:
        damage, self.controller_damage = self.controller_damage, None
        if damage is None:
            try:
                kept = self.disks[CONTROLLER].read_file(STATE_PATH)
            except FileNotFoundError:
                kept = None
        else:
            kept = damage[1]
        try:
            await node.start()
        except NodeError as error:
            self.event(f"controller failed to start: {error}")
            self.stop_controller(power_loss=False, crash=False)
            if PARTITION_STATE_FILE not in str(error):
                return
            if damage is None:
                self.violation(f"the controller cannot restart from what its disk kept: {error}")
                return
            # Refusing the damaged file is right; the operator restores it from a copy, and restarts.
            self.outcome.witnesses["controller refused a damaged partition-state file"] += 1
            self.disks[CONTROLLER].restore(STATE_PATH, kept)
            self.start_controller()
            return
        except _Died:
            self.stop_controller(power_loss=False)
            return
        c = node.controller
        started, expected = (c.leader_epoch, c.leader, c.isr), self._kept_state(kept)
        if started != expected:
            kept_text = ("no partition state" if expected is None else
                         f"leader epoch {expected[0]}, leader {expected[1]}, ISR {list(expected[2])}")
            trusted = f" (it trusted its partition-state file, damaged: {damage[0]})" if damage else ""
            self.violation(f"the controller started from leader epoch {started[0]}, leader {started[1]}, ISR "
                           f"{list(started[2])}, not from what its disk kept: {kept_text}{trusted}")
        if self.controller_starts > 1:
            self.outcome.witnesses["controller restarts"] += 1

    def stop_controller(self, power_loss: bool, crash: bool = True) -> None:
        if self.controller is None:
            return
        self.controller = None
        if crash:
            self.outcome.witnesses["controller crashes"] += 1
        self.loop.crash(CONTROLLER)  # it has no disk jobs: its saves are synchronous
        self.disks[CONTROLLER].crash(power_loss)
        self.disks[CONTROLLER].inject(None)
        self.controller_armed = None
        self.event(f"down controller power_loss={power_loss}")

    def _watch(self) -> None:
        super()._watch()
        node = self.controller
        if node is None:
            return
        died = self.disks[CONTROLLER].stats["crashes inside a system call"]
        if died != self.controller_died_in_a_call:
            # It died inside a call of its save: nothing of it runs after that.
            self.controller_died_in_a_call = died
            self.outcome.witnesses["controller crashes inside a save"] += 1
            self.stop_controller(power_loss=bool(self.controller_armed))
        elif node.failure is not None:
            self.outcome.witnesses["controller fail-stop after a disk error"] += 1
            self.stop_controller(power_loss=False, crash=False)

    # ------------------------------------------------------------------ the schedule
    async def main(self) -> None:
        self.start_controller()
        await super().main()

    async def take_step(self, number: int, step: Step, clients: list[asyncio.Task]) -> None:
        action = step.action
        if action == "outage":
            self.stop_controller(power_loss=True)
            await super().take_step(number, step, clients)
            self.start_controller()
        elif step.server != CONTROLLER_STEP or action in ("put", "get", "heal"):
            await super().take_step(number, step, clients)
        elif action in ("crash", "power"):
            if self.controller is None:
                return
            if step.arg % 2:  # inside a system call of its next save
                self.controller_armed = action == "power"
                self.disks[CONTROLLER].inject(self.rng.randint(1, 5), _Died())
                return
            self.stop_controller(power_loss=action == "power")
            if step.arg in DAMAGES:
                kept = self.disks[CONTROLLER].damage(STATE_PATH, DAMAGES[step.arg])
                if kept is not None:
                    self.controller_damage = (DAMAGES[step.arg], kept)
                    self.outcome.witnesses[f"controller partition-state file {DAMAGES[step.arg]}"] += 1
            await asyncio.sleep(0.05 * (1 + step.arg))
            self.start_controller()
        elif action == "restart":
            self.start_controller()
        elif action == "isolate":
            for broker in SERVERS:
                self.loop.network.partition(CONTROLLER, broker)
            self.outcome.witnesses["controller partitions"] += 1
        elif action == "fault":
            if self.controller is not None:
                error = errno.ENOSPC if step.arg % 2 == 0 else errno.EIO
                self.disks[CONTROLLER].inject(1 + step.arg // 2, error)

    async def settle(self, clients: list[asyncio.Task]) -> None:
        if self.controller_armed is not None:  # no save came: crash it now
            self.stop_controller(self.controller_armed)
        self.disks[CONTROLLER].inject(None)
        self.start_controller()
        await super().settle(clients)


def kafka_schedules(max_steps: int = 10, max_pause_ms: int = 200):
    """Hypothesis strategy: `bridge.dst.schedules()` whose steps may also name the controller
    (`server` 3), and whose crash step is a broker's or the controller's."""
    return schedules(max_steps, max_pause_ms, machines=CONTROLLER_STEP + 1)
