"""The bridge between the model and the implementation: the simulated cluster of real replicas
(`simcluster`), the drivers that run one model action on them (`drivers`), and the Hypothesis
conformance machine (`machine`). It may import `model` and `impl`; neither imports it."""
