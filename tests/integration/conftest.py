"""Integration tests: the S3 stand-in fixture until s3core's `s3_server` is merged (then this file goes)."""

from tests.integration.s3fixture import s3_server

__all__ = ["s3_server"]
