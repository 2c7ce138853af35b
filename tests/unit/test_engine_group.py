"""Where a point's ranks meet rank 0's rendezvous store."""

from __future__ import annotations

import socket

from worker.engines.group import store_host

UNRESOLVABLE = "studyctl-no-such-host.invalid"  # .invalid never resolves (RFC 2606)


def test_a_name_that_resolves_is_kept() -> None:
    name = socket.gethostname()
    socket.getaddrinfo(name, None)  # this machine's own name resolves here
    assert store_host([name, name]) == name


def test_a_single_host_without_an_address_meets_on_loopback() -> None:
    assert store_host([UNRESOLVABLE] * 3) == "127.0.0.1"


def test_several_hosts_keep_the_name_even_unresolved() -> None:
    """Loopback would send the other nodes' ranks to themselves: the name stays, and the join fails there."""
    assert store_host([UNRESOLVABLE, "node2"]) == UNRESOLVABLE
