"""The z3 proofs: the quorum arithmetic (`quorum`), an inductive invariant (`induction`), bounded
model checking (`bmc`) and the symbolic encoding they share (`symbolic`); `plan` runs the parts
`hwm prove` asks for."""
