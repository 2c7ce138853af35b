"""Result-row columns read by name below the tables (the topics' tables and the shared plots), named once here;
`results` builds the rows that carry them."""

from __future__ import annotations

from studyctl.definition.result.result_schema import RankRequests

# An object store's requests per checkpoint, summed over ranks (definition.result.result_schema.RankRequests): one
# column
# per kind, named requests_<kind>; first_byte_s_max is the slowest rank's time to first byte. Absent on POSIX.
REQUEST_KINDS = tuple(k for k in RankRequests.model_fields if k != "first_byte_s")

# A restore's residency sample (mincore, right before the read): pages already in the page cache, of those sampled;
# None where not sampled.
RESIDENCY_COLUMNS = ("resident_pages_before", "pages_sampled")
