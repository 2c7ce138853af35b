"""studyctl: scaling studies of LLM checkpoint I/O on Slurm clusters."""

__version__ = "0.1.0"
