"""The z3 proofs: the quorum arithmetic (`quorum`), an inductive invariant (`induction`), bounded
model checking (`bmc`) and the symbolic encoding they share (`symbolic`, extended by each other system's,
`encodings` picking a protocol's); `plan` runs the parts `hwm prove` asks for."""
