"""The specification: one explicit-state model per system (`raft`, `zab`, `kafka`, `bookkeeper`) over
the shared state (`state`), encoding (`encoding`) and action vocabulary (`actions`); `registry`
builds the model of a protocol. It knows nothing of how it is explored (`hwm.checker` does that)."""
