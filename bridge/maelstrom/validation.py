"""Each observed change of a node, stepped against the model of the preset the node implements.

With `--protocol P`, every observation (observe.py) becomes one `hwm-events/1` event fed to
`checker/observed.py`'s validator over P's model, as TLA+ trace validation feeds a logged run to a
spec: the first observation that no model step explains is a finding, `ModelStep`, naming the
step, the node, the state it showed, and the nearest model step from the states possible before.

The mapping from what a node shows to the model's variables:

- a node's generation is named only where the model has it: a leader's own, one a leader was
  seen to lead, or 0; a candidate's or a voter's generation, before anyone leads it, is unnamed
  (the model's elections are atomic and spend no generation on a failed one). A candidate is a
  follower;
- under Kafka a follower's epoch is the controller's election, whose LeaderAndIsr reaches every live
  broker at once; the controller elects on its own timer, so followers may show the epoch before hwm
  next reads its leader. Once the leader shows it, they are named first, as told with its election
  (checker/observed_kafka.py), and the leader's state may count their fetches in the new epoch;
- a kill is a crash, the node's first answer after its restart is the restart with what it
  recovered. Under raft and zab that is at least the generation it showed before the kill (a lower
  one is a finding even where the model, which never named that generation, would accept it: the
  generation of a node's vote is on disk before the node shows it), and may be a higher one, named
  by a leader, that it persisted by granting a vote or standing as a candidate in an election no
  model step counted it in: a generation some node had shown by the kill, or the next one (its own
  candidacy, unseen).
  The model's restart then carries that generation (checker/observed.py, `restart-voted`);
- under raft and zab, a node that shows itself leader of a generation below one already led, right
  after it showed its candidacy for that generation (a paused candidate reading its voters' grants
  late), may have won it then: a generation a quorum had shown and no node had led
  (checker/observed.py, `elect-late`);
- on the log workload, where an index is a log index, a `log_append` acknowledged at index i and
  a `log_read` served at index i are checked after the node's next answer: the entry must be at
  or below the node's high-water mark there, as the model allows a read or an acknowledgement. On
  the kafka workload the same holds for a `send` acknowledged at offset i and each message a `poll`
  served at offset i, for a node whose offsets are log indexes (it says `"kafka_offsets":
  "log-index"` in `hwm_state_ok`: hwm's own node multiplexes every key onto its one log). Another
  node's offsets are per key, and nothing it shows maps them to its log.
"""

from __future__ import annotations

import time

from hwm.bridge.maelstrom.history import Finding
from hwm.bridge.maelstrom.observe import describe_observation
from hwm.checker.observed import ObservedValidator
from hwm.checker.observed_kafka import ObservedKafkaValidator
from hwm.checker.observed_zab import ObservedZabValidator
from hwm.properties.catalogue import ALWAYS
from hwm.properties.events import Event, Header
from hwm.properties.protocol import resolve

# The variables a node's hwm_state answer shows (its reads are judged by the history checks).
LOGGED = frozenset({"generation", "role", "log", "hwm"})
FINDING = "ModelStep"
# The explanations the validator keeps between events, and how many times as many a discrepancy found
# after it dropped some is stepped again with, within WIDENED_SECONDS: past that, the stepping is
# undecided (reported, never a finding).
MAX_CANDIDATES = 2000
WIDER = 10
WIDENED_SECONDS = 120


# The systems whose correct nodes' finer steps a validator knows: raft's (checker/observed.py),
# ZAB's (checker/observed_zab.py) and Kafka's (checker/observed_kafka.py).
VALIDATORS = {"raft": ObservedValidator, "zab": ObservedZabValidator, "kafka": ObservedKafkaValidator}
STEPPED_SYSTEMS = tuple(VALIDATORS)


def steps_against_model(protocol) -> bool:
    """Whether a run with this preset is stepped against its model: the presets of a system in
    `STEPPED_SYSTEMS`. Another system's model makes a leader learn each acknowledgement in the same
    step as its follower's append, which would reject correct nodes."""
    return protocol is not None and resolve(protocol)[1].system in VALIDATORS


class ModelSteps:
    """Feeds one run's observations to the validator; `finding` is the first unexplained one."""

    def __init__(self, protocol, node_ids: list[str], depth: int = 2, max_candidates: int = MAX_CANDIDATES):
        self.name, self.protocol = resolve(protocol)
        self.header = Header(tuple(node_ids), LOGGED)
        self.depth = depth
        self.validator = self._validator(max_candidates)
        # Every event fed, with its options: a discrepancy found after the validator dropped explanations
        # is stepped again from the start with more kept (`_widened`).
        self.fed: list[tuple[Event, dict]] = []
        self.undecided: str | None = None  # the stepping stopped at its bound, without a finding
        self.led: set[int] = {0}  # generations some node was seen to lead (0: every node's first)
        self.down: set[str] = set()
        self.unnamed: dict[str, dict] = {}  # a follower's last observation, with a generation no one had led
        self.highest = 0  # the highest generation any node has shown
        # A killed node: the generation it showed last, and the highest any node had shown by then.
        self.before_kill: dict[str, tuple[int, int]] = {}
        self.standing: dict[str, int] = {}  # a node whose last observation was a candidacy: its generation
        self.showed: dict[int, set[str]] = {}  # each generation: the nodes that have shown it
        self.events = 0
        self.finding: Finding | None = None

    def _validator(self, max_candidates: int):
        return VALIDATORS[self.protocol.system](self.protocol, self.header, depth=self.depth,
                                                max_candidates=max_candidates)

    def _widened(self, discrepancy):
        """`discrepancy`, found after the validator dropped explanations beyond its bound: the events fed so
        far stepped again with WIDER times as many kept, within WIDENED_SECONDS. None where they are
        explained then (the stepping goes on with the wider validator); the discrepancy where the
        wider search kept everything and still explains nothing (a finding); else it stays undecided."""
        validator = self._validator(self.validator.max_candidates * WIDER)
        deadline = time.monotonic() + WIDENED_SECONDS
        again = None
        for event, options in self.fed:
            again = validator.feed(event, **options)
            if again is not None or time.monotonic() > deadline:
                break
        else:
            self.validator = validator
            return None
        if again is not None and not validator.capped:
            self.validator = validator
            return again
        self.undecided = (f"the validator kept {validator.max_candidates:,} explanations and dropped the rest "
                          f"{validator.capped} times" if again is not None else
                          f"stepping it again with {validator.max_candidates:,} explanations kept took over "
                          f"{WIDENED_SECONDS} s")
        return None

    def always(self) -> tuple:
        """The `always` properties each observed change is checked with: a variant's, which count its
        replication quorum where they count a quorum and add its own invariants (docs/variants.md), else
        the catalogue's."""
        if getattr(type(self.protocol), "variant", None) is None:
            return ALWAYS
        return tuple(p for p in self.validator.model.properties if p.kind == "always")

    def observed(self, seen: dict) -> Finding | None:
        """One observation (a dict of observe.py's shape); the finding if the model cannot make it."""
        node = seen["node"]
        if not seen["alive"]:
            self.down.add(node)
            self.unnamed.pop(node, None)
            self.standing.pop(node, None)
            self.before_kill[node] = (seen["generation"], self.highest)
            return self._feed(Event(server=node, crash=True), seen, f"{node} killed")
        generation = seen["generation"]
        # A candidate that shows nothing between its candidacy and its leadership (paused, its voters'
        # grants held) may lead a generation below ones already led (checker/observed.py,
        # `elect-late`): its own candidacy's, which a quorum had shown and no node had led.
        late = (self.protocol.system in ("raft", "zab") and seen["role"] == "leader" and generation not in self.led
                and generation < max(self.led) and self.standing.get(node) == generation
                and len(self.showed.get(generation, set()) | {node}) >= self.validator.model.quorum)
        if seen["role"] == "candidate":
            self.standing[node] = generation
        else:
            self.standing.pop(node, None)
        self.showed.setdefault(generation, set()).add(node)
        if seen["role"] == "leader":
            self.led.add(generation)
        # A candidate's generation is its own, which no leader may ever have led; a follower's is
        # named once a leader of it was seen.
        named = seen["role"] != "candidate" and generation in self.led
        restart = node in self.down
        persisted, forgot = False, None
        if restart and node in self.before_kill and self.protocol.system in ("raft", "zab"):
            shown, highest = self.before_kill.pop(node)
            # A vote it granted, or its own candidacy, before the kill: on its disk, and counted by no
            # model step (the model's election is atomic). At least the generation it showed before
            # the kill; at most one some node had shown by then, or the next (its own candidacy,
            # unseen): never one first reached after it died.
            forgot = shown if generation < shown else None
            persisted = named and shown <= generation <= max(highest, shown + 1)
        self.highest = max(self.highest, generation)
        event = Event(server=node, generation=generation if named else -1,
                      role="leader" if seen["role"] == "leader" else "follower",
                      log=tuple((i, g) for i, g in seen["log"]), hwm=seen["hwm"], restart=restart)
        self.down.discard(node)
        if named or seen["role"] == "candidate":
            self.unnamed.pop(node, None)
        else:
            self.unnamed[node] = seen
        # Under Kafka a follower shows an epoch only once the controller's LeaderAndIsr of it has reached
        # it, after its election: the followers that showed it before its leader did are named first, as
        # followers of that leader. The leader's first observation may count what they did since (a
        # fetch in the new epoch, the ISR expansion it made), as when the controller elects on its own
        # timer and hwm reads the leader only at its next input. Under raft and zab a voter's
        # generation is its vote's, and the candidate's win names it.
        voters_first = self.protocol.system == "kafka" and seen["role"] == "leader"
        finding = self._name_voters(node, generation, seen, led_by=node) if voters_first else None
        if finding is not None:
            return finding
        finding = self._feed(event, seen, None, seen.get("isr"), persisted, late)
        if finding is None and forgot is not None:
            return self._forgot(seen, forgot)  # the model keeps a generation only where it named it
        if seen["role"] == "leader" and finding is None and not voters_first:
            finding = self._name_voters(node, generation, seen)
        return finding

    def _name_voters(self, node: str, generation: int, seen: dict, led_by: str | None = None) -> Finding | None:
        """The nodes that showed `generation` before anyone led it, now that `node` shows itself its leader:
        the generation is named, and their state (unchanged since, so not observed again) is the model's
        voter's. `led_by`: a Kafka epoch's leader, each of these a follower of it (told with its election)."""
        voters = [voter for voter, shown in self.unnamed.items() if shown["generation"] == generation]
        for voter in voters:
            shown = self.unnamed.pop(voter)
            finding = self._feed(Event(server=voter, generation=generation), dict(shown, step=seen["step"],
                                 cause=seen["cause"]), f"{voter}, of {node}'s generation {generation},",
                                 leader=led_by, told=voters)
            if finding is not None:
                return finding
        return None

    def client(self, node: str, kind: str, index: int, seen: dict, step, cause: str,
               op_type: str = "log_append") -> Finding | None:
        """A log_append (or send) acknowledged (kind "ack") or a log_read (or poll) served ("read") at
        `index`, judged on the node's state `seen` right after it."""
        log = seen["log"]
        entry = ((index, log[index - 1][1] if 1 <= index <= len(log) else seen["generation"]),)
        event = Event(server=node, **{kind: entry})
        what = {"send": "acknowledged send at offset", "poll": "served a poll of offset"}.get(
            op_type, "acknowledged log_append at index" if kind == "ack" else "served log_read of index")
        return self._feed(event, dict(seen, node=node, step=step, cause=cause), f"{node} {what} {index}")

    def finish(self) -> Finding | None:
        """The end of the run: some explanation must have shown every change its model steps made."""
        if self.finding is not None or self.undecided is not None:
            return None
        discrepancy = self.validator.finish()
        if discrepancy is not None and self.validator.capped:
            again = self._widened(discrepancy)
            if again is None and self.undecided is None:  # every event explained again: is one complete now?
                again = self.validator.finish()
                if again is not None and self.validator.capped:
                    self.undecided = (f"the validator kept {self.validator.max_candidates:,} explanations and "
                                      f"dropped the rest {self.validator.capped} times")
            if self.undecided is not None:
                self.undecided = f"at the end of the run no explanation kept is complete, but {self.undecided}"
                return None
            discrepancy = again
        if discrepancy is None:
            return None
        self.finding = Finding(FINDING, f"at the end of the run: {discrepancy.reason} (no step of {self.name}'s "
                                        f"model explains the run without a change no node ever showed)")
        return self.finding

    def _forgot(self, seen: dict, shown: int) -> Finding | None:
        """A raft or zab node back from a kill with a generation below the one it showed before, which the
        model accepted: Raft's currentTerm is persisted before the node acts on it (a correct node
        shows nothing it has not saved), and the model's crash keeps it, but the model misses it where
        the generation shown was a vote's or a candidacy's, which no model step counts."""
        state = " ".join(describe_observation(seen).split()[1:])
        self.finding = Finding(FINDING, f"after {seen['cause']}, {seen['node']} showed {state}: no step of "
                                        f"{self.name}'s model makes this (it restarted with generation "
                                        f"{seen['generation']}, below the generation {shown} it showed before "
                                        f"it was killed: a generation is on disk before a node shows it, and a "
                                        f"restart keeps it)", seen["step"])
        return self.finding

    def _feed(self, event: Event, seen: dict, what: str | None, isr: list | None = None,
              persisted: bool = False, late: bool = False, leader: str | None = None,
              told: list | None = None) -> Finding | None:
        if self.finding is not None or self.undecided is not None:
            return None
        self.events += 1
        if leader is not None:  # a Kafka follower of that epoch's leader, with the others it told
            options = dict(leader=leader, told=told)
        elif isr is not None and isinstance(self.validator, ObservedKafkaValidator):
            options = dict(isr=isr)  # a Kafka leader's ISR is compared too
        elif persisted:
            options = dict(persisted_generation=True)
        elif late:
            options = dict(late_election=True)
        else:
            options = {}
        self.fed.append((event, options))
        discrepancy = self.validator.feed(event, **options)
        if discrepancy is not None and self.validator.capped:
            # The explanation that makes this step may be one the bound dropped: a finding only where a
            # search that kept every explanation finds none.
            discrepancy = self._widened(discrepancy)
            if discrepancy is None and self.undecided is not None:
                state = " ".join(describe_observation(seen).split()[1:])
                self.undecided = (f"after {seen['cause']}, {what or seen['node']} showed {state}: no explanation "
                                  f"kept makes it, but {self.undecided}; not a finding (--clock virtual steps "
                                  f"finer)")
        if discrepancy is None:
            return None
        state = " ".join(describe_observation(seen).split()[1:])
        shown = f"{what} while it showed {state}" if what else f"{seen['node']} showed {state}"
        # Candidates that differ only where nodes show nothing (match indexes, replies) read alike.
        before = list(dict.fromkeys(", ".join(" ".join(line.split()) for line in text.splitlines())
                                    for text in discrepancy.before))
        self.finding = Finding(FINDING, f"after {seen['cause']}, {shown}: no step of {self.name}'s model makes "
                                        f"this ({discrepancy.reason}); nearest model step: {' '.join(discrepancy.nearest.split())}; "
                                        f"possible just before: {' | '.join(before[:2])}"
                                        + (" | ..." if len(before) > 2 else ""),
                               seen["step"])
        return self.finding
