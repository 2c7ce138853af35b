"""The MPI checkpoint worker: lays out, writes, fsyncs and cold-reads a checkpoint."""
