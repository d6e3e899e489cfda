"""hwm.teach, the teaching library: explained replays, pictures of traces, the explorers and state graphs.

`frame` is a replay's row; `explain` says why each step changed what it changed (with the raft
family's words in `raft_words` and each other system's in `systems`), the one place the terminal
replay, the HTML page, the SVG files and the explorer take their words from; `motion` adds what a
picture shows of a step (its messages, the quorum behind a new high-water mark); `text` writes a
replay as a table of steps; `svg` draws a state; `page` writes the self-contained HTML page of a
trace; `explorer` and `node_explorer` serve the interactive pages; `graph_render` writes state
graphs as .dot and .svg. It imports the libraries below it, never the command line, which renders
through it.
"""
