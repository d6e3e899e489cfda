"""hwm as Maelstrom: drive any replicated-log node program over stdin/stdout (docs/tutorial-your-node.md).

- `protocol`  the line protocol: envelopes, error codes, what a node may say to whom;
- `process`   one node process: its own process group and data directory, kill, restart, pause;
- `services`  the lin-kv, seq-kv and lww-kv services hwm answers itself;
- `schedule`  the steps of a run and the `hwm-schedule/1` file that saves them;
- `cluster`   a run: the network that owns every message, the clients, the clock, the final checks;
- `history`   the checks on the client history (kafka and log workloads);
- `lin_kv`    the lin-kv workload's check: each key's history linearizable (`hwm.checker.linearizable`);
- `observe`   the introspected cluster states and the property catalogue on them;
- `hunt`      the Hypothesis state machine that chooses schedules and shrinks a failing one.
"""
