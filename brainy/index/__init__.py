"""The index floor: projections, postings, vectors, graph, aggregate state and the followers that keep them."""
