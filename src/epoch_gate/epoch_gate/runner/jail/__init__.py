"""Where product code runs: the bubblewrap arguments of every jail (`isolation`), and the child's own jail,
limits and watch (`confine`)."""
