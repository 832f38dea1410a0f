"""Neural networks: actor-critic MLPs; layer initialisation in one place."""
