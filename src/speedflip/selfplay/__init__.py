"""Self-play: ratings, scripted and frozen opponents, head-to-head matches."""
