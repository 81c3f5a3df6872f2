"""The run store (DESIGN §6-7): run folders, ids and locks, atomic writes, the journal of every
intervention's lifecycle and crash recovery, and operator decisions sent from another terminal.
Below everything that writes a run (optimizer, runtime) so none of them imports upward."""
