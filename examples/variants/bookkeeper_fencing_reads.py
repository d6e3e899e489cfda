"""Recovery reads that fence (apache/bookkeeper pull request 2616, FLAG_DO_FENCING) written as a model
on BookKeeper: a per-bookie field on top of the BookKeeper system's model whose recovery reads do not
fence (`bookkeeper_recovery_reads_fence=false`, issue 2614; docs/variants.md, "A model: fields and
actions").

`read_fenced`: ledger recovery's entry read reached the bookie with the fencing flag; from then on the
bookie refuses the writer's adds (LedgerFencedException). Its journal is durable, so a crash keeps it.

- `FencingRecoveryReads`: the bookie fences itself on the recovery read, as the fix does;
- `FencingRecoveryReadsInMemory`: the bookie keeps that fence in memory only, and a bookie that
  restarts accepts the writer's add again: the fix undone by a crash.
"""

from hwm.model.variant import Variant

WITHOUT_FENCING_READS = {"preset": "bookkeeper", "flags": {"bookkeeper_recovery_reads_fence": False}}


def fenced_bookie_behind(view):
    """a bookie a recovery read fenced lacks an entry the writer added"""
    writer = view.servers[-2]  # the bookies, then the writer and the recovery client
    for k, bookie in enumerate(view.servers[:-2]):
        if bookie.read_fenced and len(bookie.log) < len(writer.log):
            return f"S{k + 1}, fenced by a recovery read, lacks entry {len(bookie.log) + 1} the writer added"
    return None


class FencingRecoveryReads(Variant):
    """A recovery read fences the bookie it reaches, durably."""

    base = WITHOUT_FENCING_READS
    fields = {"read_fenced": False}
    witnesses = {"FencedBookieBehind": fenced_bookie_behind}

    def refuses(self, state, action):
        if action[0] == "send_add" and state.servers[action[1]].read_fenced:
            return f"S{action[1] + 1} answers LedgerFencedException: a recovery read fenced it"
        return None

    def after(self, state, action, next_state):
        if action[0] == "recovery_read":
            return self.with_server(next_state, action[1], read_fenced=True)
        return next_state


class FencingRecoveryReadsInMemory(FencingRecoveryReads):
    """The recovery read's fence is lost when the bookie crashes."""

    def after(self, state, action, next_state):
        if action[0] == "crash":
            return self.with_server(next_state, action[1], read_fenced=False)
        return super().after(state, action, next_state)
