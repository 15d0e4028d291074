"""One module per lab, each registering its exercises (loaded on demand by helpers.grading.get)."""
