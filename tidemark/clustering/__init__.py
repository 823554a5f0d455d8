"""Clustering layouts: the plan strategy (Hudi's size-based one) and the row orders (linear,
z-order, Hilbert) that the planner service and the clustering job share."""
