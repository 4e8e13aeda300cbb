"""`roll view` and `rome-bench view`: a run as one self-contained static HTML folder (no server needed)."""
