"""The checker: engines that explore any model of `hwm.model` and judge what they find.

One engine interface (`run.run`: a `CheckRequest` in, a `report.Report` out, whatever the engine):
the local breadth-first search (`engine`, with its successor backends in `backend` and the compiled
copy of the model in `fast/`, and its worker processes in `workers`), Spark (`spark_engine`), random
walks (`simulation`); the liveness search (`liveness`), the state graph (`graph`); the verdict rules
(`verdict`), the saved counterexamples (`traces`) and replay on the model (`replay`). It imports the
model and the properties, never the implementation or the command line.
"""
