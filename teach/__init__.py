"""Teaching: explained replays, pictures of traces, the explorer and state graphs.

`explain` says why each step changed what it changed (one module, used by the
terminal replay, the HTML page, the SVG files and the explorer); `svg` draws a
state; `page` writes the self-contained HTML page of a trace; `explorer` serves
the interactive page; `graph_render` writes state graphs as .dot and .svg.
"""
