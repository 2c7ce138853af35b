"""`python -m studyctl.cli`: the same as the `studyctl` command."""

from studyctl.cli import main

main()
