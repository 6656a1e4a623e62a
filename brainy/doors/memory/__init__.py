"""The memory profile (DOORS 9.2): what an agent keeps, as ordinary rows (docs/memory.md).

``records`` lays a memory out as rows; ``recall`` ranks them (recall) and ``context`` lays them out for a budget (context); ``keeping`` writes them
(remember, abstract, cite, reinforce, retire, consolidate); ``timeline`` keeps conversations (turn, turns);
``browse`` reads them (read, list, stats); ``notes`` keeps a note as a file and its memory in one commit (write). Importing the package registers every native memory door.
"""

from brainy.doors.memory import browse, context, keeping, notes, recall, records, timeline  # noqa: F401  (each registers its doors)
