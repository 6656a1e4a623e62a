"""The fleet: many ``brainy serve`` nodes answering as one (docs/fleet.md).

Placement lives in etcd: each node registers itself under a lease, each brain's owner is a key held under
its owner's lease, and a brain changes hands only by an etcd transaction on its epoch. Any node answers any
brain: a request for a brain owned elsewhere is forwarded to the owner. This floor sits above auth and below
the host: the host hands it brain names and asks it who owns them; it never holds a brain.
"""
