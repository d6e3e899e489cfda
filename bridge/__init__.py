"""The bridge between the model and real implementations: the simulated cluster of real replicas
that runs one model action at a time (`simcluster`), the Hypothesis conformance machine that drives
it against the model (`conformance`), the deterministic simulation of the real runtime (`dst`), and
replay of saved traces on the implementation (`replay`). It may import `model`, `checker` and `impl`;
none of them imports it."""
