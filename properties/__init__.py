"""The property catalogue, the snapshot type and the shared vocabulary (flags, quorum, traces)."""
