"""`tandem.client`: the `tandem` command line and its display, the benchmarks, the fault drills, and the
implementation of the API for trained policies that `tandem` re-exports (`from tandem import load_policy`).
Light imports: the daemons do the work."""
