"""Operations: what a team's servers report about Parley (metrics, health)."""
