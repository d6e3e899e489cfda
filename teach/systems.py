"""Each system's own words: why a Kafka, ZAB or BookKeeper step changed what it changed, and
what of a server's state a picture shows beyond its log and its high-water mark.

`hwm.teach.raft_words` speaks for the raft family; a model of another system (`protocol.system`)
is explained here, from the states before and after a step and the model's own rules (Kafka's
leader-epoch cache and truncation offsets come from `model.kafka`, not recomputed). Where a step
means what it means in the raft model (ZAB's broadcast phase), the raft words are reused.
"""

from __future__ import annotations

from typing import Any, Callable

from hwm.model.kafka import diverged_at, end_offset_for, end_offset_kip101, epoch_cache, truncation_offset
from hwm.properties.snapshot import FOLLOWER, LEADER, fields_text, server_name
from hwm.teach.frame import added_entries, entries, entry, removed_entries
from hwm.teach.raft_words import RAFT_WORDS, quorum_reasoning

Explainer = Callable[..., list[str]]


def system_of(model: Any) -> str:
    protocol = getattr(model, "protocol", None)
    return getattr(protocol, "system", "raft") if protocol is not None else "raft"


def names(positions) -> str:
    return "{" + ",".join(server_name(k) for k in positions) + "}"


def _removed(old_log, new_log, values) -> str:
    return entries(removed_entries(old_log, new_log), values)


# ====================================================================== Kafka
def isr_of(state, leader: int | None = None) -> list[int]:
    """The controller's ISR (a leader always counts itself, as maybeIncrementLeaderHW does)."""
    return [k for k, s in enumerate(state.servers) if s.in_isr or k == leader]


def epoch_cache_text(log) -> str:
    """LeaderEpochFileCache as `epoch@start offset`: `1@0 3@1` (epoch 1 from offset 0, epoch 3 from 1)."""
    return " ".join(f"{epoch}@{start}" for epoch, start in epoch_cache(tuple(log))) or "empty"


def kafka_hw(model, before, after, l: int, values) -> list[str]:
    """HW = min LEO over the ISR, with the numbers: the rule of Partition.maybeIncrementLeaderHW."""
    leader = after.servers[l]
    if leader.role != LEADER or not leader.match:
        return []
    name = server_name(l)
    isr = isr_of(after, l)
    # The leader counts its own copy of the ISR; it differs from the controller's when an update of one
    # never reached the other (a deposed or cut-off leader).
    own = [k for k in range(len(after.servers)) if k == l or (leader.isr and leader.isr[k])]
    label = f"ISR {names(isr)}" if own == isr else f"the ISR {names(own)} {name} counts"
    isr = own
    leos = {k: len(leader.log) if k == l else leader.match[k] for k in isr}
    shown = ", ".join(f"{server_name(k)}={leos[k]}" for k in isr)
    old = before.servers[l].hwm if before.servers[l].role == LEADER else leader.hwm
    lines = []
    if len(isr) < model.min_isr:
        return [f"{name}'s {label} is smaller than min.insync.replicas {model.min_isr}: its HW stays "
                f"{leader.hwm}"]
    hw = min(leos.values())
    lines.append(f"HW = min LEO over {label} ({shown}) = {hw}")
    if leader.hwm > old:
        lines.append(f"{name}'s HW rises {old} -> {leader.hwm}")
    else:
        lines.append(f"{name}'s HW stays {leader.hwm}" + (": it never decreases" if hw < leader.hwm else ""))
    acked = sorted(getattr(after, "acked", frozenset()) - getattr(before, "acked", frozenset()))
    if acked:
        lines.append(f"producers of {entries(acked, values)} get their acks=all answer (the HW covers entries of "
                     f"{name}'s epoch {leader.generation})")
    return lines


def _kafka_become_follower(model, name, old, new, leader_name, epoch, values) -> list[str]:
    if model.rule == "own-hwm":
        gone = _removed(old.log, new.log, values)
        return [f"{name} becomes a follower of {leader_name} in epoch {epoch} and truncates its log to its own HW "
                f"{old.hwm} (pre-KIP-101): " + ("removes " + gone if gone != "none" else "nothing lies above it")]
    if model.rule == "last-fetched-epoch":
        return [f"{name} becomes a follower of {leader_name} in epoch {epoch} and truncates nothing (KIP-320's first "
                f"attempt): its fetches carry the epoch of its last entry, and only a LOG_TRUNCATION answer makes it "
                f"truncate"]
    return [f"{name} becomes a follower of {leader_name} in epoch {epoch}; before its next fetch it asks "
            f"{leader_name} where its own last epoch ends (OffsetsForLeaderEpoch, KIP-101) instead of truncating "
            f"to its HW {old.hwm}"]


def kafka_elect(model, before, action, after, values):
    _, c, voters = action
    name, epoch = server_name(c), after.servers[c].generation
    cand = before.servers[c]
    live_isr = [k for k, s in enumerate(before.servers) if s.in_isr and s.alive]
    if cand.in_isr:
        lines = [f"the controller elects {name} leader of epoch {epoch}: {name} is in the ISR "
                 f"{names(isr_of(before))}"]
    else:
        lines = [f"no replica of the ISR {names(isr_of(before))} is alive: the controller elects {name}, outside the "
                 f"ISR, leader of epoch {epoch} (unclean.leader.election.enable) and {name} alone is the new ISR"]
    if live_isr and cand.in_isr and isr_of(after) != isr_of(before):
        lines.append(f"the new ISR is the live ISR: {names(isr_of(after))}")
    for v in voters:
        if v == c:
            continue
        old, new = before.servers[v], after.servers[v]
        if old.role != LEADER and old.leader == c + 1 and new.log == old.log and new.truncating == old.truncating:
            lines.append(f"{server_name(v)} already follows {name}: makeFollower returns early and "
                         f"{server_name(v)} only learns epoch {epoch}")
        else:
            lines += _kafka_become_follower(model, server_name(v), old, new, name, epoch, values)
    for k, s in enumerate(before.servers):
        if k not in voters and s.alive:
            leading = "leads" if s.role == LEADER else "knows"
            lines.append(f"{server_name(k)} missed the LeaderAndIsr request: it still {leading} epoch {s.generation}")
    return lines + kafka_hw(model, before, after, c, values)


def kafka_write(model, before, action, after, values):
    l = action[1]
    new = after.servers[l]
    lines = [f"{server_name(l)} appends {entry(len(new.log), new.log[-1], values)} in leader epoch {new.generation} "
             f"(offset {len(new.log) - 1}; its LEO is now {len(new.log)})"]
    return lines + kafka_hw(model, before, after, l, values)


def kafka_truncation(model, leader_log, follower, fname, lname) -> list[str]:
    """The truncation exchange of a new follower, in KIP-101's and KIP-279's words."""

    log, rule = tuple(follower.log), model.rule
    offset = truncation_offset(rule, log, follower.hwm, tuple(leader_log))
    if not log:
        return [f"{fname} has an empty log: nothing to truncate"]
    requested = log[-1]
    cache = epoch_cache_text(leader_log)
    if rule == "leader-epoch":
        end = end_offset_kip101(tuple(leader_log), requested)
        if end is None:
            return [f"{fname} asks {lname} where epoch {requested} ends (OffsetsForLeaderEpoch); {lname}'s epoch "
                    f"cache ({cache}) has no epoch at or after it: UNDEFINED, so {fname} falls back to its HW "
                    f"{follower.hwm} and truncates to offset {offset}"]
        how = ("it is its latest epoch, so it answers its LEO" if end == len(leader_log) and cache.split()[-1].startswith(f"{requested}@")
               else f"it answers the start offset of its first epoch after {requested}")
        return [f"{fname} asks {lname} where epoch {requested} ends (OffsetsForLeaderEpoch, KIP-101); {lname}'s "
                f"epoch cache is {cache} (epoch@start offset): {how}, {end}",
                f"{fname} truncates to offset min({end}, its LEO {len(log)}) = {offset}"]
    epoch, end = end_offset_for(tuple(leader_log), requested)
    if epoch is None:
        if rule == "leader-epoch-kip279":
            return [f"{fname} asks {lname} where epoch {requested} ends; {lname}'s epoch cache ({cache}) has no "
                    f"epoch at or below it: UNDEFINED, so {fname} falls back to its HW {follower.hwm} and truncates "
                    f"to offset {offset}"]
        return [f"{fname} asks {lname} where epoch {requested} ends; {lname} has no epoch at or below it and answers "
                f"its log start, {end} (KAFKA-7415): {fname} truncates to offset {offset}"]
    lines = [f"{fname} asks {lname} where epoch {requested} ends (OffsetsForLeaderEpoch); {lname}'s epoch cache is "
             f"{cache}: it answers epoch {epoch}, end offset {end} (KIP-279: the largest epoch at or below {requested})"]
    if epoch != requested:
        own = end_offset_for(log, epoch)[1]
        lines.append(f"{lname} lacks epoch {requested}: {fname} truncates to the smaller of {end} and its own end "
                     f"offset for epoch {epoch}, {own}: offset {offset}")
    else:
        lines.append(f"{fname} truncates to offset min({end}, its LEO {len(log)}) = {offset}")
    return lines


def kafka_replicate(model, before, action, after, values):
    _, l, f = action
    ln, fn = server_name(l), server_name(f)
    leader, follower, new = before.servers[l], before.servers[f], after.servers[f]
    lines = []
    log = tuple(follower.log)
    if follower.truncating:
        lines += kafka_truncation(model, leader.log, follower, fn, ln)
        cut = log[:truncation_offset(model.rule, log, follower.hwm, tuple(leader.log))]
        if cut != log:
            lines.append(f"{fn} removes {_removed(log, cut, values)}")
        log = cut
    elif model.rule == "last-fetched-epoch" and diverged_at(log, tuple(leader.log)) is not None:
        cut = log[:diverged_at(log, tuple(leader.log))]
        held = f"holds {entry(len(log), leader.log[len(log) - 1], values)} there" if len(leader.log) >= len(log) \
            else f"has no offset {len(log) - 1}"
        lines.append(f"{fn}'s fetch carries epoch {log[-1]}, the epoch of its last entry at offset {len(log) - 1}; "
                     f"{ln} {held}: LOG_TRUNCATION, and {fn} truncates to {len(cut)}, past the last entry both hold, "
                     f"removing {_removed(log, cut, values)}")
        log = cut
    if len(log) > len(leader.log):
        lines.append(f"{fn}'s fetch offset {len(log)} is past {ln}'s LEO {len(leader.log)}: OFFSET_OUT_OF_RANGE, "
                     f"{fn} truncates to {len(leader.log)} and removes {_removed(log, log[:len(leader.log)], values)}")
        log = log[:len(leader.log)]
    fetched = [(i + 1, g) for i, g in enumerate(leader.log) if i >= len(log)]
    if fetched:
        lines.append(f"{fn} fetches from offset {len(log)}, its LEO: appends {entries(fetched, values)} (a fetch does "
                     f"not check the entry before it)")
    else:
        lines.append(f"{fn} fetches from offset {len(log)}, its LEO: {ln} has nothing more")
    if new.hwm != follower.hwm:
        lines.append(f"{fn}'s HW {follower.hwm} -> {new.hwm}: the leader's HW {leader.hwm}, capped at its LEO {len(new.log)}")
    lines.append(f"{ln} records {fn}'s LEO {len(new.log)}")
    if new.in_isr and not follower.in_isr:
        lines.append(f"{fn} has caught up to {ln}'s HW {leader.hwm}: {ln} adds it back to the ISR "
                     f"{names(isr_of(after))}")
    return lines + kafka_hw(model, before, after, l, values)


def kafka_shrink_isr(model, before, action, after, values):
    _, l, f = action
    leader, follower = before.servers[l], before.servers[f]
    why = ("it is down" if not follower.alive else
           f"it has fetched only up to offset {leader.match[f]}, behind {server_name(l)}'s LEO {len(leader.log)} "
           f"(replica.lag.time.max.ms)")
    if getattr(after, "cut", None) and after.cut[l] and not getattr(model, "fencing", True):
        own = [k for k in range(len(after.servers)) if k == l or after.servers[l].isr[k]]
        return ([f"{server_name(l)} removes {server_name(f)} from the ISR it counts: {why}; the update never "
                 f"reaches the controller, cut off from {server_name(l)}, but {server_name(l)} acts on it without "
                 f"controller_fencing: it counts {names(own)}, the controller still {names(isr_of(after))}"]
                + kafka_hw(model, before, after, l, values))
    return ([f"{server_name(l)} removes {server_name(f)} from the ISR: {why}; the ISR is now {names(isr_of(after))}"]
            + kafka_hw(model, before, after, l, values))


def kafka_partition(model, before, action, after, values):
    k = action[1]
    name = server_name(k)
    lines = [f"the network cuts {name} off from the other brokers and from the controller: no fetch crosses the "
             f"cut and no request of the controller reaches {name} ({after.partitions} of max_partitions "
             f"{model.config.max_partitions})"]
    if not model.fencing:
        return lines + [f"without controller_fencing nothing expires {name}'s session: the controller's ISR stays "
                        f"{names(isr_of(after))}"]
    if before.servers[k].in_isr and not after.servers[k].in_isr:
        lines.append(f"{name}'s session expires and the controller fences it: it leaves the ISR, now "
                     f"{names(isr_of(after))}")
        for j, (b, a) in enumerate(zip(before.servers, after.servers)):
            if j != k and a.role == LEADER and a.alive and b.isr != a.isr:
                lines += kafka_hw(model, before, after, j, values)
    elif before.servers[k].alive and before.servers[k].in_isr:
        lines.append(f"{name}'s session expires, but it is the last replica of the ISR: the controller keeps it there")
    if before.servers[k].role == LEADER and before.servers[k].alive:
        lines.append(f"{name} still believes it leads epoch {before.servers[k].generation}; its ISR updates cannot reach "
                     f"the controller, so its HW waits for followers that can no longer fetch from it")
    return lines


def kafka_heal(model, before, action, after, values):
    lines = ["the partition heals: every broker reaches every other and the controller again"]
    for k, (b, a) in enumerate(zip(before.servers, after.servers)):
        if b.role == LEADER and a.role != LEADER:
            leader = f"follows {server_name(a.leader - 1)}" if a.leader else "waits for the controller to elect a leader"
            lines.append(f"{server_name(k)} re-registers with the controller and learns epoch {a.generation}: it was "
                         f"fenced, stops leading and {leader}")
    return lines


def kafka_read(model, before, action, after, values):
    r = action[1]
    server = before.servers[r]
    readable = min(server.hwm, len(server.log))
    return [f"a consumer reads from {server_name(r)} every entry below its HW {server.hwm}: "
            f"{entries([(i + 1, server.log[i]) for i in range(readable)], values)}"]


def kafka_crash(model, before, action, after, values):
    c = action[1]
    old, new = before.servers[c], after.servers[c]
    if getattr(model, "unflushed", False):
        lost = old.log[len(new.log):]
        lines = [f"{server_name(c)} loses power (log_flush=never): its log comes back with its flushed prefix "
                 f"only, {len(new.log)} of {len(old.log)} entries" + (f", without {entries([(len(new.log) + i + 1, g) for i, g in enumerate(lost)], values)}"
                                            if lost else "") + f"; its checkpointed HW is {new.hwm}"]
        if old.in_isr:
            lines.append(f"the controller removes {server_name(c)} from the ISR" if not new.in_isr else
                         f"{server_name(c)} is the last replica of the ISR: the controller keeps it there")
        return lines + newly_acknowledged(before, after, values, "committed: the HW over the smaller ISR covers them")
    isr = f"; the ISR is the controller's and still holds {server_name(c)}" if old.in_isr else ""
    return [f"{server_name(c)} crashes: its log, its leader epoch {old.generation} and its checkpointed HW {old.hwm} "
            f"are on disk" + (", its view of the followers' LEOs is lost" if old.role == LEADER else "") + isr]


def kafka_flush(model, before, action, after, values):
    k = action[1]
    return [f"{server_name(k)}'s log reaches its disk (the OS writes the page cache back): its recovery point is "
            f"its log end offset {len(after.servers[k].log)}"]


def kafka_restart(model, before, action, after, values):
    r = action[1]
    name = server_name(r)
    old, new = before.servers[r], after.servers[r]
    if not new.leader:
        lines = [f"{name} restarts; the controller knows no live leader of epoch {new.generation}: it has no "
                 f"leader to fetch from"]
        leader_name = "no leader"
    else:
        leader_name = server_name(new.leader - 1)
        lines = [f"{name} restarts; the controller tells it epoch {new.generation} and leader {leader_name}"]
    return lines + _kafka_become_follower(model, name, old, new, leader_name, new.generation, values)


def kafka_leader_and_isr(model, before, action, after, values):
    _, l, r = action
    name, leader_name = server_name(r), server_name(l)
    old, new = before.servers[r], after.servers[r]
    epoch = new.generation
    lines = [f"the LeaderAndIsr request of epoch {epoch} (leader {leader_name}) reaches {name} late: {name} knows "
             f"epoch {old.generation}, and acts on any request newer than that"]
    if old.role != LEADER and old.leader == l + 1 and new.log == old.log and new.truncating == old.truncating:
        return lines + [f"{name} already follows {leader_name}: makeFollower returns early and {name} only learns "
                        f"epoch {epoch}"]
    return lines + _kafka_become_follower(model, name, old, new, leader_name, epoch, values)


KAFKA = {"elect": kafka_elect, "write": kafka_write, "replicate": kafka_replicate, "shrink_isr": kafka_shrink_isr,
         "read": kafka_read, "crash": kafka_crash, "restart": kafka_restart, "leader_and_isr": kafka_leader_and_isr,
         "flush": kafka_flush, "partition": kafka_partition, "heal": kafka_heal}


# ======================================================================== ZAB
def newly_acknowledged(before, after, values, how: str) -> list[str]:
    """The entries a step acknowledged to clients (the `acked` ghost), if any."""
    acked = sorted(getattr(after, "acked", frozenset()) - getattr(before, "acked", frozenset()))
    return [f"clients are told {entries(acked, values)} {how}"] if acked else []


def _zab_acks(model, state, l: int) -> list[int]:
    """The servers whose NEWLEADER acknowledgement leader `l` holds (itself included)."""
    mask = state.synced[l]
    return sorted({l} | {k for k in range(model.n) if mask >> k & 1})


def zab_elect(model, before, action, after, values):
    _, c, voters = action
    name = server_name(c)
    new = after.servers[c]
    lines = [f"{name} wins the election of epoch {new.generation} with the votes of "
             f"{', '.join(map(server_name, voters))} ({len(voters)} of {model.n}, a quorum is {model.quorum})"]
    if model.protocol.election == "longest-log":
        fresh = model.freshness(before, c)
        lines.append(f"no voter's history is fresher than {name}'s (currentEpoch {fresh[0]}, last zxid "
                     f"{fresh[1]}.{fresh[2]}): fast leader election's order")
    if len(new.log) > len(before.servers[c].log):
        lines.append(f"{name} logs a no-op entry {entry(len(new.log), new.log[-1])} of its epoch")
    if model.established(after, c):
        lines.append(f"{name} alone is a quorum: it is established at once")
    else:
        lines.append(f"{name} is a prospective leader: it may neither broadcast nor commit until a quorum "
                     f"({model.quorum}) has acknowledged its NEWLEADER (ZAB phase 2, synchronisation)")
    for k, s in enumerate(before.servers):
        if s.role == LEADER and s.alive and k != c:
            if k in voters:
                lines.append(f"{server_name(k)} joins epoch {new.generation} and stops leading")
            else:
                lines.append(f"{server_name(k)} did not vote and still leads epoch {s.generation}")
    return lines


def zab_sync(model, before, action, after, values):
    _, l, f = action
    ln, fn = server_name(l), server_name(f)
    leader, follower, new = before.servers[l], before.servers[f], after.servers[f]
    if follower.generation > leader.generation:
        return [f"{fn} is in epoch {follower.generation}, above {ln}'s {leader.generation}: {ln} learns it is stale "
                f"and steps down"]
    lines = [f"{ln} synchronises {fn} (DIFF/TRUNC/SNAP): {fn}'s history becomes {ln}'s"]
    gone = _removed(follower.log, new.log, values)
    if gone != "none":
        lines.append(f"{fn} truncates {gone} (TRUNC)")
    added = added_entries(follower.log, new.log)
    if added:
        lines.append(f"{fn} receives {entries(added, values)} (DIFF)")
    lines.append(f"{fn} writes currentEpoch {leader.generation} and acknowledges NEWLEADER")
    durable = after.durable[f]
    if durable < len(new.log):
        lines.append(f"{fn} acknowledges before it logs the new proposals (ZOOKEEPER-3911): only {durable} of its "
                     f"{len(new.log)} entries are on disk, the rest are in memory (packetsNotCommitted)")
    elif added:
        lines.append(f"{fn} logs the new proposals before it acknowledges: all {len(new.log)} entries are on disk")
    acks = _zab_acks(model, after, l)
    if model.established(after, l) and not model.established(before, l):
        lines.append(f"{ln} holds NEWLEADER acknowledgements from {names(acks)} ({len(acks)} of {model.n}, a quorum "
                     f"is {model.quorum}): {ln} is established and commits its whole history at once")
        if after.servers[l].hwm != leader.hwm:
            lines.append(f"{ln}'s high-water mark {leader.hwm} -> {after.servers[l].hwm}")
    elif not model.established(after, l):
        lines.append(f"{ln} holds NEWLEADER acknowledgements from {names(acks)} ({len(acks)} of {model.n}, a quorum "
                     f"is {model.quorum}): still prospective")
    else:
        lines += quorum_reasoning(model, leader, after.servers[l], l)
    if new.hwm != follower.hwm:
        lines.append(f"{fn}'s high-water mark {follower.hwm} -> {new.hwm}")
    return lines + newly_acknowledged(before, after, values, "committed")


def zab_persist(model, before, action, after, values):
    k = action[1]
    name = server_name(k)
    lines = [f"{name} flushes its proposals to disk (SyncRequestProcessor): on disk {before.durable[k]} -> "
             f"{after.durable[k]} entries"]
    for l, (old, new) in enumerate(zip(before.servers, after.servers)):
        if l != k and old.role == LEADER and old.match != new.match:
            lines.append(f"{name} acknowledges them to {server_name(l)}")
            lines += quorum_reasoning(model, old, new, l)
    return lines + newly_acknowledged(before, after, values, "committed")


def zab_crash(model, before, action, after, values):
    c = action[1]
    old, new = before.servers[c], after.servers[c]
    name = server_name(c)
    lines = [f"{name} crashes: its currentEpoch and the {before.durable[c]} logged entries survive; "
             f"its high-water mark {old.hwm} -> {new.hwm}"]
    gone = _removed(old.log, new.log, values)
    if gone != "none":
        lines.append(f"{name} loses {gone}: acknowledged, but only in memory")
    if old.role == LEADER:
        lines.append(f"{name} stops leading; its followers must synchronise again with a new leader")
    else:
        lines.append(f"the NEWLEADER acknowledgement it gave is forgotten: it synchronises again when it returns")
    return lines


def zab_raft_words(name: str) -> Explainer:
    """ZAB's broadcast phase is the raft model's: its words, plus what ZAB adds on disk."""
    def explain(model, before, action, after, values):
        lines = RAFT_WORDS[name](model, before, action, after, values)
        if name in ("write", "replicate"):
            k = action[1] if name == "write" else action[2]
            if after.durable[k] > before.durable[k]:
                lines.append(f"{server_name(k)} logs it before it acknowledges (on disk: {after.durable[k]} entries)")
        return lines + newly_acknowledged(before, after, values, "committed")
    return explain


def zab_steps_down(model, before, after) -> list[str]:
    """check_quorum (model/zab_partition.py): the leaders a step left without a quorum."""
    lines = []
    cut = getattr(after, "cut", (False,) * len(after.servers))
    for k, (b, a) in enumerate(zip(before.servers, after.servers)):
        if b.alive and a.alive and b.role == LEADER and a.role != LEADER and a.generation == b.generation:
            reached = sum(1 for j, other in enumerate(after.servers) if other.alive and cut[j] == cut[k])
            lines.append(f"{server_name(k)} hears from {reached} of {len(after.servers)} servers (itself included) "
                         f"within syncLimit, fewer than a quorum: Leader.lead shuts it down and it goes back to "
                         f"LOOKING, keeping epoch {a.generation} and its history (check_quorum)")
    return lines


def zab_partition(model, before, action, after, values):
    lines = [f"the network cuts {server_name(action[1])} off from every other server: no vote, synchronisation or "
             f"proposal crosses the cut ({after.partitions} of max_partitions {model.config.max_partitions})"]
    return lines + zab_steps_down(model, before, after)


def zab_heal(model, before, action, after, values):
    return ["the partition heals: every server reaches every other again"]


def zab_crash_and_quorum(model, before, action, after, values):
    return zab_crash(model, before, action, after, values) + zab_steps_down(model, before, after)


ZAB = {"elect": zab_elect, "sync": zab_sync, "persist": zab_persist, "crash": zab_crash_and_quorum,
       "partition": zab_partition, "heal": zab_heal,
       **{name: zab_raft_words(name) for name in ("write", "replicate", "read", "restart")}}


# ================================================================= BookKeeper
def bk_add(model, before, action, after, values):
    writer = after.servers[model.writer]
    return [f"the writer adds entry {len(writer.log)} to the ledger: on no bookie yet"]


def bk_lac(model, before, after, values) -> list[str]:
    writer = after.servers[model.writer]
    stored = ", ".join(f"{server_name(b)}={writer.match[b]}" for b in model.bookies)
    old = before.servers[model.writer].hwm
    quorum = (f"quorum of {model.ack_quorum} bookies of each entry's write set" if model.in_ledger_terms
              else f"quorum of {model.ack_quorum} of {model.n} bookies")
    lines = [f"the bookies' acknowledged entries, as the writer counts them: {stored}; LAC = the last entry stored, with all before it, on an ack "
             f"{quorum} = {writer.hwm}"]
    if writer.hwm > old:
        lines.append(f"the writer's LAC rises {old} -> {writer.hwm}: its client is told entries up to "
                     f"{writer.hwm} are written")
    return lines


def bk_send_add(model, before, action, after, values):
    b = action[1]
    name = server_name(b)
    writer = before.servers[model.writer]
    if before.fenced >> b & 1:
        return [f"{name} is fenced: it refuses the writer's add, and the writer learns the ledger is being recovered "
                f"(LedgerFencedException) and stops"]
    bookie, new = before.servers[b], after.servers[b]
    added = added_entries(bookie.log, new.log)
    sent = ", ".join(str(i) for i, _ in added)  # every entry is the writer's: its index names it
    lines = [f"the writer sends {name} " + (f"entry {sent}" if len(added) == 1 else f"entries {sent}" if added
                                            else "no new entry")
             + f" with its LAC {writer.hwm}; {name} " + ("stores it" if len(added) == 1 else "stores them" if added
                                                         else "records the LAC")
             + (" (it is not fenced)" if before.responded or before.negatives else "")]
    return lines + bk_lac(model, before, after, values)


def bk_fence(model, before, action, after, values):
    b = action[1]
    name = server_name(b)
    answered = bin(after.responded).count("1")
    lines = [f"recovery sends {name} a fencing LAC read: {name} is fenced (it refuses the writer's adds from now on) "
             f"and reports its LAC {before.servers[b].hwm}"]
    lines.append(f"{answered} of {model.ledger.ensemble_size} bookies answered; recovery reads start after E - AQ + 1 = "
                 f"{model.fencing_needed}: then no ack quorum of unfenced bookies remains")
    return lines


def bk_recovery_read(model, before, action, after, values):
    b = action[1]
    name = server_name(b)
    recovery = before.servers[model.recovery]
    index = len(recovery.log) + 1
    bookie = before.servers[b]
    lines = []
    if model._holds(bookie.log, index):
        lines.append(f"recovery reads entry {index} from {name}: {name} has it, so it is recovered (to be written back)")
    else:
        negatives = bin(after.negatives).count("1") if not model.closed(after) else model.missing_needed
        lines.append(f"recovery reads entry {index} from {name}: {name} answers it has no such entry "
                     f"({negatives} of the WQ - AQ + 1 = {model.missing_needed} answers that prove it does not exist)")
    if not before.fenced >> b & 1:
        if model.reads_fence:
            lines.append(f"the recovery read fences {name} too (FLAG_DO_FENCING)")
        else:
            lines.append(f"{name} was never fenced and the recovery read does not fence it (BookKeeper issue 2614): "
                         f"{name} still accepts the writer's adds")
    if model.closed(after) and not model.closed(before):
        end = len(after.servers[model.recovery].log)
        lines.append(f"entry {index} does not exist: recovery closes the ledger with last entry {end} and writes the "
                     f"recovered entries back; nothing after entry {end} is part of the ledger")
        for k in model.bookies:
            gone = _removed(before.servers[k].log, after.servers[k].log, values)
            if gone != "none":
                lines.append(f"{server_name(k)}'s {gone} lies beyond the closed ledger")
    return lines


def bk_read(model, before, action, after, values):
    r = action[1]
    server = before.servers[r]
    readable = min(server.hwm, len(server.log))
    return [f"a reader reads from {server_name(r)} every entry up to the LAC it has seen, {server.hwm}: "
            f"{entries([(i + 1, server.log[i]) for i in range(readable) if server.log[i]], values)}"]


def bk_crash(model, before, action, after, values):
    return [f"{server_name(action[1])} crashes: its journal keeps its entries, its LAC and its fence"]


def bk_restart(model, before, action, after, values):
    return [f"{server_name(action[1])} restarts with its journal: entries, LAC and fence as they were"]


def bk_change_ensemble(model, before, action, after, values):
    b = action[1]
    name = server_name(b)
    writer = before.servers[model.writer]
    if after.servers[model.writer].role != writer.role:
        return [f"the writer's add to {name} failed (it is down), so it tries to replace {name}; its conditional update "
                f"of the ledger metadata fails (recovery changed the version when it began), and the writer, holding "
                f"back its add completions, learns the ledger is in recovery and stops"]
    first, ensemble = after.ensembles[-1]
    new = ", ".join(server_name(k) for k in ensemble)
    lines = [f"the writer's add to {name} failed (it is down): the writer replaces it, in a new fragment from entry "
             f"{first} (its first unconfirmed entry) on, with ensemble {new}; {name}'s acknowledgements from entry "
             f"{first} on no longer count"]
    if after.stored == len(after.ensembles):
        lines.append("its conditional update of the ledger metadata succeeds: readers and recovery see the new ensemble")
    else:
        lines.append("its conditional update of the ledger metadata fails (recovery changed the version), but this "
                     "writer does not hold back its add completions (BookKeeper issue 1591): it goes on with an "
                     "ensemble the metadata does not name")
    return lines


BOOKKEEPER = {"add": bk_add, "send_add": bk_send_add, "fence": bk_fence, "recovery_read": bk_recovery_read,
              "read": bk_read, "crash": bk_crash, "restart": bk_restart, "change_ensemble": bk_change_ensemble}

SYSTEMS: dict[str, dict[str, Explainer]] = {"kafka": KAFKA, "zab": ZAB, "bookkeeper": BOOKKEEPER}


def explainer(model: Any, action: str) -> Explainer | None:
    """This module's words for `action` of `model`'s system, None for the raft family."""
    return SYSTEMS.get(system_of(model), {}).get(action)


# ================================================================ the picture
def role_word(server: Any) -> str:
    """A server's role as a picture names it: leader, follower, down, or the role a node program
    reports of itself that the model has no word for (a candidate between its vote and its election)."""
    if not server.alive:
        return "down"
    if server.role in (LEADER, FOLLOWER):
        return server.role
    return str(server.role or FOLLOWER)


def row(state: Any, k: int) -> dict:
    """What a picture shows of server k beyond its log: its role line, the name of its
    high-water mark (Kafka's HW, BookKeeper's LAC), up to two short notes, the servers whose
    match index a leader shows, and the first index that is only in memory (ZAB), if any. A
    variant's fields (model.variant_model), as name=value, are its first note on every system."""
    out = _system_row(state, k)
    server = state.servers[k]
    if getattr(server, "extra", ()):
        out["notes"].insert(0, fields_text(server).strip())
    return out


def _system_row(state: Any, k: int) -> dict:
    server = state.servers[k]
    alive = server.alive
    role = role_word(server)
    out = {"role": f"{role} g{server.generation}", "hwm": "hwm", "notes": [], "memory_from": None,
           "match": range(len(state.servers))}
    if hasattr(state, "fenced"):  # BookKeeper: bookies, then the writer and the recovery client
        n = len(state.servers) - 2
        out["match"] = range(n)  # the writer counts the bookies' acknowledgements
        out["hwm"] = "LAC"
        if k < n:
            out["role"] = "bookie" + ("" if alive else " (down)")
            if state.fenced >> k & 1:
                out["notes"].append("fenced")
            elif state.responded or state.negatives:
                out["notes"].append("not fenced")
        elif k == n:
            out["role"] = "writer" if server.role == LEADER else "writer (fenced out)"
        else:
            out["hwm"] = "last"
            out["role"] = "recovery" if server.role != LEADER else "recovery: closed"
            if server.role == LEADER:
                out["notes"].append(f"ledger closed at {len(server.log)}")
            elif server.log:
                out["notes"].append(f"recovered {len(server.log)}")
        return out
    if hasattr(state, "synced"):  # ZAB
        if alive and server.role == LEADER:
            established = bool(state.synced[k] & 1 << 7)
            out["role"] += " established" if established else " prospective"
            acks = [j for j in range(len(state.servers)) if state.synced[k] >> j & 1]
            out["notes"].append("NEWLEADER acks " + (",".join(server_name(j) for j in acks) or "none"))
        else:
            leader = next((j for j, m in enumerate(state.synced) if j != k and m >> k & 1), None)
            if leader is not None:
                out["notes"].append(f"synced with {server_name(leader)}")
        if state.durable[k] < len(server.log):
            out["notes"].append(f"on disk {state.durable[k]} of {len(server.log)}")
            out["memory_from"] = state.durable[k] + 1
        if len(out["notes"]) < 2:
            out["notes"].append(f"currentEpoch {state.epochs[k]}")
        return out
    if hasattr(server, "in_isr"):  # Kafka
        out["hwm"] = "HW"
        out["role"] = f"{role} epoch {server.generation}"
        if alive and server.role == LEADER:
            out["notes"].append("ISR " + names(isr_of(state, k)))
        else:
            isr = "in ISR" if server.in_isr else "not in ISR"
            fetches = f", fetches {server_name(server.leader - 1)}" if alive and server.leader else ""
            out["notes"].append(isr + fetches)
        out["notes"].append("epochs " + epoch_cache_text(server.log))
        if alive and server.truncating:
            out["notes"][0] += ", truncating"
    return out
