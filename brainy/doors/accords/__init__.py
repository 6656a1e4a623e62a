"""The accords profile (DOORS 9.1): a negotiation board kept inside a brain (docs/accords.md).

``ids`` names records by protocol id (a kind's prefix, a slug, a thread number); ``model`` lays the nine kinds
out as rows and answers an AccordRecord; ``rules`` holds rules A1-A4 and R16, each where it is enforced;
``views`` is how the reads read (segments of find, batches of point reads) and what it costs them; ``reads``
answers inbox, dashboard, read and timeline, ``search`` the fifth read; ``writes`` the eight writes and the
presence stamp. Importing the package registers every accords door.
"""

from brainy.doors.accords import reads, search, writes  # noqa: F401  (each registers its doors)
