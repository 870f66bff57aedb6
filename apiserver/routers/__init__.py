"""HTTP routers: resources (the REST verbs for every kind), discovery, health."""
