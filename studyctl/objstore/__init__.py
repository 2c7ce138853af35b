"""Checkpoints as objects in an S3 store: the target, the client each rank uses, request counts, checks
before a study starts, and cleanup.

"Cold" for an object store: nothing on the client side holds data between a write and a read — no client
cache exists anywhere in this package (every read is a GET to the server, every byte crosses the network).
The server's own caches are the server's: for the project's local SeaweedFS `cache.drop_server_cache` drops
what can be dropped and says so; for any other endpoint it records that it did not.
Credentials come only from the standard chain (environment, profile); nothing here logs or stores them.
"""
