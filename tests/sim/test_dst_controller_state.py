"""The controller's partition-state file under faults of the medium that no fsync prevents
(bridge/dst/kafka.py, `SimDisk.damage`): torn, lost (zeros) and unreadable (EIO). The real controller
refuses each and restarts once the file is restored; one that takes a file it cannot read for none
is caught starting from leader epoch 0; one that rewrites the file in place is caught by a crash
inside its save. (The simulation used to damage nothing it had fsynced, so the check that the
controller restarts from its file could not fail: docs/mutation.md.)"""

from __future__ import annotations

import os
import random

import pytest

from hwm.bridge.dst import Schedule, Step, run_schedule
from hwm.bridge.dst.disk import SimDisk
from hwm.bridge.dst.kafka import CONTROLLER_STEP, DAMAGES
from hwm.properties.protocol import KAFKA


def damaging(arg: int) -> Schedule:
    """A put, the controller crashes (its file, saved at the first election, damaged as `arg` says),
    and another put once it is back."""
    return Schedule(seed=5, steps=(Step(50, "put", 0), Step(150, "crash", CONTROLLER_STEP, arg), Step(50, "put", 1)))


@pytest.mark.parametrize("arg", sorted(DAMAGES))
def test_the_controller_refuses_a_damaged_partition_state_file_and_one_that_trusts_it_is_caught(arg):
    kind = DAMAGES[arg]
    real = run_schedule(damaging(arg), protocol=KAFKA)
    assert not real.violations, real.report(damaging(arg))
    assert real.witnesses[f"controller partition-state file {kind}"] == 1, dict(real.witnesses)
    assert real.witnesses["controller refused a damaged partition-state file"] == 1, dict(real.witnesses)
    assert real.witnesses["controller restarts"] == 1 and real.witnesses["acknowledged puts"] >= 2, dict(real.witnesses)
    # Restored and restarted at once, not left down until the end of the schedule.
    refused = next(e for e in real.events if "controller failed to start" in e)
    restarted = next(e for e in real.events[real.events.index(refused):] if e.endswith(" start controller"))
    assert refused.split()[0] == restarted.split()[0], (refused, restarted)
    planted = run_schedule(damaging(arg), plant="controller-trusts-damaged-state", protocol=KAFKA,
                           first_violation=True)
    assert any("the controller started from leader epoch 0" in v and f"damaged: {kind}" in v
               for v in planted.violations), planted.report(damaging(arg))


def test_an_undamaged_restart_is_not_counted_as_a_refusal():
    outcome = run_schedule(damaging(0), protocol=KAFKA)
    assert not outcome.violations and outcome.witnesses["controller restarts"] == 1, outcome.report(damaging(0))
    assert not any("damaged" in name or "partition-state file" in name for name in outcome.witnesses), \
        dict(outcome.witnesses)


def test_a_controller_that_saves_in_place_is_caught_by_a_crash_inside_its_save():
    # The controller dies inside its next save (arg 1); S1's crash makes it save a new ISR.
    schedule = Schedule(seed=5, steps=(Step(50, "put", 0), Step(150, "crash", CONTROLLER_STEP, 1),
                                       Step(0, "crash", 0, 0), Step(50, "heal", 1)))
    real = run_schedule(schedule, protocol=KAFKA)
    assert not real.violations and real.witnesses["controller crashes inside a save"], real.report(schedule)
    planted = run_schedule(schedule, plant="controller-saves-in-place", protocol=KAFKA, first_violation=True)
    assert any("the controller cannot restart from what its disk kept" in v for v in planted.violations), \
        planted.report(schedule)


def test_damage_keeps_a_strict_prefix_zeros_or_nothing_readable_until_restored():
    content = b'{"leader_epoch": 7, "leader": "S2", "isr": ["S2", "S3"]}'
    for seed in range(20):
        disk = SimDisk(random.Random(seed), ("/data",))
        fd = disk.open("/data/state", os.O_WRONLY | os.O_CREAT, 0o644)
        disk.write(fd, content)
        disk.fsync(fd)
        disk.fsync_directory("/data")
        assert disk.damage("/data/state", "torn") == content
        torn = disk.read_file("/data/state")
        assert len(torn) < len(content) and content.startswith(torn)
        disk.crash(power_loss=True)  # the damage is on the medium: a power failure does not undo it
        assert disk.read_file("/data/state") == torn
    disk.restore("/data/state", content)
    assert disk.damage("/data/state", "lost") == content and disk.read_file("/data/state") == bytes(len(content))
    disk.restore("/data/state", content)
    disk.damage("/data/state", "eio")
    with pytest.raises(OSError, match="Input/output error"):
        disk.read_file("/data/state")
    fd = disk.open("/data/state", os.O_RDONLY)
    with pytest.raises(OSError, match="Input/output error"):
        disk.pread(fd, 10, 0)
    disk.restore("/data/state", content)
    assert disk.read_file("/data/state") == content and disk.pread(fd, 10, 0) == content[:10]
    assert disk.damage("/data/none", "torn") is None
    with pytest.raises(ValueError, match="damage kind 'flipped'"):
        disk.damage("/data/state", "flipped")
